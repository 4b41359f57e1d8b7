"""``pctk bench``: interconnect and training benchmarks."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Benchmarks that validate the accelerator and interconnect layers.",
    no_args_is_help=True,
)
