"""``pctk health``: run the sweep, write the expectations file for a prolog, list checks.

``pctk health run`` exits with Nagios codes so a monitor can call it directly: 0 OK,
1 WARNING, 2 CRITICAL (a check failed), 3 UNKNOWN. Unusable input (unknown partition or
node, bad level) also exits 3: nothing could be checked, and 2 would claim the cluster is
critical. Other pctk commands keep 2 for unusable input.
"""

from __future__ import annotations

from pathlib import Path

import typer

from benchmarks.health.runner import CHECKS
from toolkit.cliopts import DbOption, StoreOption
from toolkit.cliout import JsonOption, emit_json, exit_with
from toolkit.cliout import console as cli_console
from toolkit.fsutil import atomic_write_json
from toolkit.health import report, slownodes
from toolkit.health.expect import build_expectations
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
    from toolkit.api.health import health_run

    with long_command():
        done = health_run(
            nodes, partition=partition, level=level, drain=drain, max_drain=max_drain,
            resume_healthy=resume_healthy, mounts=list(mount) if mount else None,
            tool_path=list(tool_path or []), checks=checks, dcgm_level=dcgm_level,
            workdir=workdir, run_dir=run_dir, timeout=timeout, python=python, out=out,
            store=False)
        if as_json:
            emit_json(done.record)
        else:
            report.print_report(done.result)
            cli_console().print(f"record: {out or done.record_path}\n{next_step(done.record)}",
                                highlight=False)
        if store:
            store_finished_run(done.record_path, db)
        exit_with(done.exit_code)  # Nagios: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN


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
    from toolkit.api.health import slow_nodes

    with long_command():
        done = slow_nodes(
            nodes, partition=partition, method=method, collective=collective, size=size,
            iters=iters, threshold=threshold, max_rounds=max_rounds, timeout=timeout,
            drain=drain, workdir=workdir, python=python, nccl_tests_dir=nccl_tests_dir,
            include_powered_down=include_powered_down, store=False)
        if as_json:
            emit_json(done.result.to_json(), sort_keys=False)
        else:
            slownodes.print_report(done.result)
            cli_console().print(f"pair records: {done.folder}\n{next_step(done.record)}",
                                highlight=False)
        if store:
            store_finished_run(done.record_path, db)
        exit_with(done.exit_code)


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
