"""``pctk bench scaling``: parse the flags, call the driver, print the table and the verdict.

The training options are the same TrainConfig-derived ones ``pctk bench fsdp`` offers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from toolkit.api import training as api
from toolkit.bench.fsdp.cli import (
    DRIVER_DEFAULTS,
    TRAIN_OPTIONS,
    TRAIN_PANEL,
    train_options,
    with_options,
)
from toolkit.bench.scaling import driver
from toolkit.cliopts import DbOption, StoreOption
from toolkit.cliout import JsonOption, emit_json, fail_if
from toolkit.cliout import console as cli_console
from toolkit.results.diagnose import BOTTLENECKS, verdict_lines
from toolkit.results.nextstep import next_step
from toolkit.submit.longrun import long_command


@with_options(train_options(TRAIN_OPTIONS, DRIVER_DEFAULTS, TRAIN_PANEL))
def scaling_command(
    nodes: str = typer.Option("1,2,4", "--nodes", "-N", help="Node counts, e.g. 1,2,4."),
    strong: bool = typer.Option(False, "--strong", help="Keep the smallest size's global "
                                "batch (strong scaling) instead of the per-GPU batch (weak)."),
    batch_per_gpu: int = typer.Option(1, help="Sequences per GPU per step (at the smallest "
                                      "size with --strong)."),
    partition: str | None = typer.Option(None, "--partition", "-p", help="Slurm partition."),
    instance_type: str | None = typer.Option(
        None, help="Instance type in the catalog: GPUs per node, peak TFLOP/s, busbw."),
    tasks_per_node: int | None = typer.Option(
        None, help="Ranks per node [GPUs of --instance-type, else 8]."),
    gpus_per_node: int | None = typer.Option(
        None, help="GPUs to request per node (GRES); 0 for CPU partitions [= ranks]."),
    launcher: str = typer.Option("srun", help="srun (one task per GPU) or torchrun."),
    time_limit: str | None = typer.Option(None, "--time", help="Slurm time limit."),
    run_dir: Annotated[Path | None, typer.Option(
        help="Shared folder for script, logs and records "
        "[<state home>/runs/scaling-MODEL-TIME].")] = None,
    timeout: float | None = typer.Option(None, help="Give up waiting after this many seconds."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the batch script only."),
    as_json: bool = JsonOption,
    store: bool = StoreOption,
    db: Path | None = DbOption,
    **train: Any,
) -> None:
    """FSDP scaling study: the benchmark at several node counts, a prediction and a diagnosis."""
    job = api.scaling_job(nodes, strong=strong, batch_per_gpu=batch_per_gpu,
                          partition=partition, instance_type=instance_type,
                          tasks_per_node=tasks_per_node, gpus_per_node=gpus_per_node,
                          launcher=launcher, time_limit=time_limit, run_dir=run_dir, **train)
    if dry_run:
        typer.echo(driver.render_sbatch(job), nl=False)
        return
    with long_command():
        done = api.run_scaling(job, timeout=timeout, progress=not as_json, store=store, db=db)
    rec = done.record
    if as_json:
        emit_json({"record": rec, "job_id": done.job_id, "missing_sizes": done.missing,
                   "plots": [str(p) for p in done.plots], "bottlenecks": list(BOTTLENECKS)})
    else:
        print_study(rec)
        for n in done.missing:
            typer.echo(f"{n} node(s): no record (see {job.run_dir / f'slurm-{done.job_id}.out'})")
        typer.echo(f"record: {job.record_path}\nplots: "
                   + ", ".join(str(p) for p in done.plots))
        typer.echo(next_step(rec))
    fail_if(done.failed)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def print_study(rec: dict[str, Any]) -> None:
    m = rec["metrics"]
    table = Table(title=f"pctk bench scaling: {rec['params']['model']}, {m['mode']} scaling "
                  "(times in ms per step, mean over ranks)")
    for col in ("nodes", "ranks", "step", "tok/s/GPU", "eff.", "pred. no/full overlap",
                "compute", "exposed comm", "optim", "sync", "data", "ckpt", "bottleneck"):
        table.add_column(col, justify="left" if col == "bottleneck" else "right")
    for s in m["sizes"]:
        b, p, d = s["breakdown_s"], s["predicted"], s["diagnosis"]
        table.add_row(
            str(s["nodes"]), str(s["world_size"]), _ms(s["step_s"]),
            "-" if s["tokens_per_s_per_gpu"] is None else f"{s['tokens_per_s_per_gpu']:,.0f}",
            _pct(s["efficiency"]),
            f"{_pct(p['efficiency_no_overlap'])} / {_pct(p['efficiency_overlap'])}",
            *(_ms(b.get(k)) for k in ("compute", "exposed_comm", "optimizer", "sync", "data",
                                      "checkpoint")),
            d["bottleneck"] + (f" ({d['node']})" if d["node"] else ""))
    console = cli_console()
    console.print(table)
    print_verdict(m, console)


def print_verdict(verdict: dict[str, Any], console: Console | None = None) -> None:
    console = console or cli_console()
    for line in verdict_lines(verdict):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
