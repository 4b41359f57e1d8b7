"""``pctk health``: run the sweep, write the expectations file for a prolog, list checks.

``pctk health run`` exits with Nagios codes so a monitor can call it directly: 0 OK,
1 WARNING, 2 CRITICAL (a check failed), 3 UNKNOWN. Unusable input (unknown partition or
node, bad level) also exits 3: nothing could be checked, and 2 would claim the cluster is
critical. Other pctk commands keep 2 for unusable input.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from benchmarks.health.runner import CHECKS
from toolkit.cliopts import DbOption, StoreOption
from toolkit.cliout import JsonOption, emit_json, exit_with
from toolkit.fsutil import atomic_write_json
from toolkit.progress import ProgressLines

app = typer.Typer(help="Node health: GPUs, EFA, storage, munge, clock; drain and resume.",
                  no_args_is_help=True)


@app.command("run")
def run_command(
    nodes: str | None = typer.Option(None, "--nodes", "-w", help="Slurm host list."),
    partition: str | None = typer.Option(None, "--partition", "-p"),
    level: str = typer.Option("quick", "--level", help="quick (seconds) or full (NCCL, DCGM)."),
    drain: bool = typer.Option(
        False, "--drain", help="Drain nodes that fail a check (their own evidence only: a "
        "node that wrote no report is UNKNOWN, not drained)."),
    max_drain: int | None = typer.Option(
        None, "--max-drain", min=0, help="With --drain: if more nodes fail than this, drain "
        "none and say why. Default: 10% of the swept partitions' nodes, at least 1."),
    resume_healthy: bool = typer.Option(
        False, "--resume-healthy", help="Re-check nodes pctk drained; resume those that pass."),
    mount: list[str] = typer.Option(
        None, "--mount", help="Shared mount to probe (repeat; %n = node name). "
        "Default /fsx and /home."),
    tool_path: list[str] = typer.Option(
        None, "--tool-path", help="Folder searched first for tools on the nodes (%n = node)."),
    checks: str | None = typer.Option(None, "--checks", help="Comma list of checks to run."),
    dcgm_level: int = typer.Option(1, "--dcgm-level", min=1, max=3),
    workdir: Path | None = typer.Option(
        None, "--workdir", help="Shared folder for the run folders [$PCTK_HOME/health]."),
    run_dir: Path | None = typer.Option(
        None, "--run-dir", help="This run's folder, new or empty, shared with the nodes "
        "[WORKDIR/TIME-ID]."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds to wait for the job."),
    python: str | None = typer.Option(
        None, "--python", help="Python interpreter on the nodes (default: this one's path)."),
    as_json: bool = JsonOption,
    out: Path | None = typer.Option(None, "--out", "-o", help="Also write the record here."),
    store: bool = StoreOption,
    db: Path | None = DbOption,
) -> None:
    """Check nodes in one Slurm job per partition; print a node x check table."""
    from toolkit.health import report
    from toolkit.health.sweep import SweepOptions, run_sweep

    opts = SweepOptions(
        nodes=nodes, partition=partition, level=level, drain=drain,
        resume_healthy=resume_healthy, mounts=list(mount) if mount else None,
        tool_path=list(tool_path or []),
        checks=[c.strip() for c in checks.split(",") if c.strip()] if checks else None,
        dcgm_level=dcgm_level, workdir=workdir, timeout_s=timeout, max_drain=max_drain,
        run_dir=run_dir.absolute() if run_dir else None,
    )
    if python:
        opts.python = python
    with ProgressLines("health sweep") as progress:
        opts.progress = progress.update
        result = run_sweep(opts)
    record = report.to_record(result)  # one id for every copy, so it is stored once
    record_path = report.write(result, result.run_dir / "record.json", record)
    if out is not None:
        report.write(result, out, record)
    if as_json:
        emit_json(record)
    else:
        report.print_report(result)
        Console().print(f"record: {out or record_path}", highlight=False)
    if store:
        from toolkit.results.ingest import store_finished_run

        store_finished_run(record_path, db)
    exit_with(result.exit_code)  # Nagios: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN


@app.command("expectations")
def expectations_command(
    out: Path | None = typer.Option(None, "--out", "-o", help="Write here (atomically)."),
    mount: list[str] = typer.Option(None, "--mount", help="Shared mounts (repeat)."),
    instance_type: list[str] = typer.Option(
        None, "--instance-type", help="Only these types (default: the whole catalog)."),
) -> None:
    """Write the node-side expectations file (for the prolog/epilog) from the catalog."""
    from toolkit.health.expect import build_expectations

    spec = build_expectations(list(instance_type) if instance_type else None,
                              mounts=list(mount) if mount else None)
    if out is None:
        emit_json(spec)
    else:
        atomic_write_json(out, spec, 0o644)
        typer.echo(f"wrote {out}")


@app.command("checks")
def checks_command(as_json: bool = JsonOption) -> None:
    """List the checks and the level that runs them."""
    rows = [{"check": name, "level": level, "about": (fn.__doc__ or "").strip().split("\n")[0]}
            for name, fn, level in CHECKS]
    rows.insert(0, {"check": "node", "level": "quick", "about": "Slurm state and reason "
                    "(driver side)"})
    if as_json:
        emit_json(rows, sort_keys=False)
        return
    for r in rows:
        typer.echo(f"{r['check']:<13} {r['level']:<6} {r['about']}")
