"""``pctk health``: run the sweep, write the expectations file for a prolog, list checks.

``pctk health run`` exits with Nagios codes so a monitor can call it directly: 0 OK,
1 WARNING, 2 CRITICAL (a check failed), 3 UNKNOWN. Unusable input (unknown partition or
node, bad level) also exits 3: nothing could be checked, and 2 would claim the cluster is
critical. Other pctk commands keep 2 for unusable input.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from benchmarks.health.runner import CHECKS
from benchmarks.record import write_record
from benchmarks.vocab import parse_bytes
from toolkit.cliopts import DbOption, StoreOption
from toolkit.cliout import JsonOption, emit_json, exit_with
from toolkit.cliout import console as cli_console
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_json
from toolkit.health import report, slownodes
from toolkit.health.expect import build_expectations
from toolkit.health.inventory import HealthInputError
from toolkit.health.sweep import SweepOptions, run_sweep
from toolkit.paths import health_dir
from toolkit.progress import ProgressLines
from toolkit.results.ingest import store_finished_run
from toolkit.results.nextstep import next_step
from toolkit.submit.longrun import long_command

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
    with long_command():
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
            cli_console().print(f"record: {out or record_path}\n{next_step(record)}",
                                highlight=False)
        if store:
            store_finished_run(record_path, db)
        exit_with(result.exit_code)  # Nagios: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN


@app.command("slow-nodes")
def slow_nodes_command(
    nodes: str | None = typer.Option(None, "--nodes", "-w", help="Slurm host list (a rerun "
                                     "on a subset)."),
    partition: str | None = typer.Option(None, "--partition", "-p"),
    method: str = typer.Option("torch", "--method", help="torch (benchmarks/collectives.py: "
                               "gloo on CPU nodes, NCCL on GPUs) or nccl-tests."),
    collective: str = typer.Option("all_reduce", "--collective",
                                   help="all_reduce or sendrecv."),
    size: str = typer.Option("8M", "--size", help="Message size of the pair test."),
    iters: int = typer.Option(10, "--iters", min=1),
    threshold: float = typer.Option(0.5, "--threshold", help="Slow below this fraction of "
                                    "the median."),
    max_rounds: int | None = typer.Option(None, "--max-rounds", min=1,
                                          help="Default 1 + ceil(log2 N)."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds per round; pairs not "
                                  "done by then are cancelled and FAIL."),
    drain: bool = typer.Option(False, "--drain", help="Drain SLOW nodes (reason `pctk: "
                               "slow-node: <figure> vs median <figure>`)."),
    workdir: Path | None = typer.Option(None, "--workdir", help="Shared folder for the pair "
                                        "records [$PCTK_HOME/health/slow-nodes-TIME]."),
    python: str | None = typer.Option(None, "--python", help="Python on the nodes."),
    nccl_tests_dir: str | None = typer.Option(None, "--nccl-tests-dir"),
    store: bool = StoreOption,
    db: Path | None = DbOption,
    include_powered_down: bool = typer.Option(
        False, "--include-powered-down", help="Power up the selected powered-down dynamic "
        "nodes (idle~) and sweep them too; by default they are skipped, as `health run` does."),
    as_json: bool = JsonOption,
) -> None:
    """Find slow nodes: pair them, test every pair at once, re-pair suspects with good nodes.

    Exit 0 all OK, 1 a node SLOW, FAIL or left UNRESOLVED, 2 unusable input or environment.
    """
    with long_command():
        if method not in ("torch", "nccl-tests"):
            raise PctkError(f"unknown --method {method!r}", "use torch or nccl-tests")
        if collective not in ("all_reduce", "sendrecv"):
            raise PctkError(f"unknown --collective {collective!r}", "use all_reduce or sendrecv")
        try:
            if parse_bytes(size) < 1:
                raise ValueError(f"{size!r} is zero bytes")
        except ValueError as exc:
            raise PctkError(f"--size: {exc}", "write sizes like 1M, 8M, 64M") from None
        if timeout <= 0:
            raise PctkError(f"--timeout {timeout:g} must be more than 0 seconds")
        test = slownodes.PairTest(method=method, collective=collective, size=size, iters=iters,
                                  nccl_tests_dir=nccl_tests_dir)
        if python:
            test.python = python
        folder = workdir or health_dir() / time.strftime("slow-nodes-%Y%m%d-%H%M%S")
        try:
            with ProgressLines("slow-node sweep") as progress:
                result = slownodes.sweep_partition(
                    nodes=nodes, partition=partition, test=test, workdir=folder.absolute(),
                    threshold=threshold, max_rounds=max_rounds, timeout=timeout, drain=drain,
                    progress=progress.update, include_powered_down=include_powered_down)
        except HealthInputError as exc:  # health run's Nagios UNKNOWN (3); here unusable (2)
            raise PctkError(exc.message, exc.hint) from None
        atomic_write_json(folder / "slow-nodes.json", result.to_json())
        # a record like every other run's, kept in the results history (`results list`)
        logs = sorted(p.name for p in folder.glob("r*.out"))
        swept = slownodes.to_record(result, partition=partition, job_ids=result.job_ids,
                                    raw_logs=logs)
        record_path = write_record(folder / "record.json", swept)
        if as_json:
            emit_json(result.to_json(), sort_keys=False)
        else:
            slownodes.print_report(result)
            cli_console().print(f"pair records: {folder}\n{next_step(swept)}", highlight=False)
        if store:
            store_finished_run(record_path, db)
        exit_with(slownodes.exit_code(result))


@app.command("expectations")
def expectations_command(
    out: Path | None = typer.Option(None, "--out", "-o", help="Write here (atomically)."),
    mount: list[str] = typer.Option(None, "--mount", help="Shared mounts (repeat)."),
    instance_type: list[str] = typer.Option(
        None, "--instance-type", help="Only these types (default: the whole catalog)."),
) -> None:
    """Write the node-side expectations file (for the prolog/epilog) from the catalog."""
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
