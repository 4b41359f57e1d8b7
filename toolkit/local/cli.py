"""``pctk local``: start, inspect and stop the local Slurm twin."""

from __future__ import annotations

import typer

app = typer.Typer(help="The local twin: a real Slurm cluster on this machine.", no_args_is_help=True)
