"""``pctk demo``: the main job on the embedded default, end to end.

Starts the local twin from the p5 training preset, then runs what an operator runs on a new
cluster - a health sweep of the GPU queue, a torch.distributed collectives sweep and a tiny
FSDP2 training run across four nodes - stores the result records, and writes the HTML
report. Every step is a real pctk command; the demo only strings them together.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.rule import Rule

from toolkit.cli import main as pctk
from toolkit.cliopts import pick_alias
from toolkit.cliout import console as cli_console
from toolkit.errors import PctkError
from toolkit.local.twin import Twin


def run_step(console: Console, title: str, argv: list[str], ok: tuple[int, ...] = (0,)) -> int:
    """Run one pctk command in this process; its exit code, or PctkError if not in ``ok``."""
    console.print(Rule(f"[bold]{title}[/]"))
    console.print(f"[dim]$ pctk {' '.join(argv)}[/]")
    code = pctk(argv)
    if code not in ok:
        raise PctkError(f"demo step '{title}' failed (exit {code})",
                        "see the output above; `pctk local status` shows the twin")
    return code


def demo_command(
    run_dir: Path = typer.Option(None, "--run-dir",
                                 help="Folder for records, logs and the report [out/demo]."),
    old_out: Path = typer.Option(None, "--out", "-o", hidden=True,
                                 help="Deprecated: --run-dir."),
    config: str = typer.Option("p5-training", "--config", "-c",
                               help="Cluster config or preset for the twin."),
    nodes: int = typer.Option(None, "--nodes", "-n", min=1,
                              help="Nodes per compute resource of the twin (default: the "
                              "config's)."),
    db: Path = typer.Option(None, "--db", help="Results database (default: the per-user one)."),
    slurm: str = typer.Option(None, "--slurm", envvar="PCTK_SLURM", metavar="RELEASE",
                              help="The Slurm the twin runs (`pctk local up --slurm`): system, "
                              "or 24.11 (built once, about 3-5 minutes)."),
) -> None:
    """Start the twin, check node health, sweep collectives, train FSDP, store and report."""
    console = cli_console()
    out = (pick_alias(run_dir, old_out, "--run-dir", "--out") or Path("out/demo")).absolute()
    out.mkdir(parents=True, exist_ok=True)
    (out / "fsx").mkdir(exist_ok=True)  # stands in for the shared /fsx of a real cluster
    db_args = ["--db", str(db)] if db else []
    t0 = time.monotonic()
    workers = str(min(nodes or 4, 4))

    def step(title: str, argv: list[str], ok: tuple[int, ...] = (0,)) -> int:
        return run_step(console, title, argv, ok)

    step("1. Start the local twin", ["local", "up", "--config", config,
                                     *(["--nodes", str(nodes)] if nodes else []),
                                     *(["--slurm", slurm] if slurm else [])])
    os.environ.update(Twin().env())
    # Nagios codes: 0 OK, 1 WARNING (things the twin cannot have, like NVML, show as SKIP)
    step("2. Health sweep of the GPU queue", [
        "health", "run", "--partition", "gpu", "--level", "quick",
        "--mount", str(out / "fsx"), "--workdir", str(out / "health"),
        "--out", str(out / "health" / "record.json"), *db_args], ok=(0, 1))
    step(f"3. torch.distributed collectives across {workers} nodes (gloo on CPU)", [
        "bench", "collectives", "--nodes", workers, "--partition", "cpu",
        "--max-bytes", "4M", "--iters", "10", "--warmup", "3",
        "--run-dir", str(out / "collectives"), *db_args],
        ok=(0, 1))
    step(f"4. FSDP2 training, tiny Llama, {workers} ranks on {workers} nodes", [
        "bench", "fsdp", "--nodes", workers, "--model", "tiny", "--steps", "20",
        "--partition", "cpu", "--tasks-per-node", "1", "--gpus-per-node", "0",
        "--ckpt-every", "10",
        "--run-dir", str(out / "fsdp"), *db_args])
    # each run stored its record as it finished: no `results add` needed
    step("5. The stored results", ["results", "list", *db_args])
    report = out / "report.html"
    step("6. Write the report", ["report", "--out", str(report), *db_args], ok=(0, 1))
    console.print(Rule())
    console.print(f"done in {time.monotonic() - t0:.0f} s. Report: [bold]{report}[/]")
    console.print("The twin keeps running: try `eval \"$(pctk local env)\"; sinfo`, "
                  "`pctk submit -q cpu -N 2 -- hostname`, then `pctk local down`.")
