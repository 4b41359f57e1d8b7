"""``pctk bench``: interconnect and training benchmarks."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Benchmarks that validate the accelerator and interconnect layers.",
    no_args_is_help=True,
)

from toolkit.bench.fsdp import fsdp_command  # noqa: E402

app.command("fsdp")(fsdp_command)

from toolkit.nccl.cli import app as nccl_app  # noqa: E402
from toolkit.nccl.cli import collectives as collectives_command  # noqa: E402

app.add_typer(nccl_app, name="nccl")
app.command("collectives")(collectives_command)

from toolkit.bench.storage_cli import storage_command  # noqa: E402

app.command("storage")(storage_command)
