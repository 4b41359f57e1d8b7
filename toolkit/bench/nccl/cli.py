"""``pctk bench nccl run|parse|compare|plot``.

Exit codes: 0 ok (PASS, WARN), 1 a verdict FAIL or a regression, 2 unusable input.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console

from toolkit.bench.nccl.report import show_runs, wide_console
from toolkit.cliopts import DbOption, StoreOption, pick_alias
from toolkit.cliout import JsonOption, emit_json, fail_if
from toolkit.errors import PctkError
from toolkit.paths import new_run_dir
from toolkit.progress import ProgressLines

app = typer.Typer(help="nccl-tests: run on the cluster, parse logs, judge, compare, plot.",
                  no_args_is_help=True)

InstanceType = typer.Option(None, "--instance-type", envvar="PCTK_INSTANCE_TYPE",
                            help="Instance type for the busbw expectation (catalog).")
Collective = typer.Option(None, "--collective", "-c",
                          help="Collective when the log does not name it (all_reduce, ...).")
LogFiles = typer.Argument(..., help="nccl-tests logs (text or -J JSON).")
RecordOut = typer.Option(None, "--out", "-o", help="Write the pctk.result/v1 record.")
CsvOut = typer.Option(None, "--csv", help="Write the rows as CSV.")
PlotOut = typer.Option(None, "--plot", help="Write a busbw PNG.")
RunCollectives = typer.Option(["all_reduce"], "--collective", "-c",
                              help="Repeat for several (all_gather, alltoall...).")
ExtraEnv = typer.Option([], "--env", help="Extra KEY=VALUE for the run.")
RunDir = typer.Option(None, "--run-dir", help="Folder for raw logs and record.json "
                      "[<state home>/runs/nccl-tests-TIME].")
OldRunDir = typer.Option(None, "--out", "-o", hidden=True, help="Deprecated: --run-dir.")
Before = typer.Argument(..., help="Baseline: record or raw log.")
After = typer.Argument(..., help="New run: record or raw log.")
PlotFiles = typer.Argument(..., help="Records or raw logs to overlay.")
PlotPath = typer.Option(Path("busbw.png"), "--out", "-o")



def _console(as_json: bool) -> Console:
    # with --json, stdout carries only the JSON document
    return Console(stderr=True) if as_json else Console()


@app.command()
def parse(
    files: list[Path] = LogFiles,
    collective: str = Collective,
    nranks: int = typer.Option(None, "--nranks", help="Rank count when the log lacks it."),
    instance_type: str = InstanceType,
    nodes: int = typer.Option(None, "--nodes", help="Node count (default: hosts in the log)."),
    expect_ranks: int = typer.Option(None, "--expect-ranks", min=1,
                                     help="Ranks launched; a run on another count FAILs."),
    max_bytes: str = typer.Option("1G", "--max-bytes",
                                  help="Refuse logs larger than this (K, M, G suffixes)."),
    out: Path = RecordOut,
    csv_path: Path = CsvOut,
    plot_path: Path = PlotOut,
    as_json: bool = JsonOption,
    store: bool = StoreOption,
    db: Path | None = DbOption,
) -> None:
    """Parse nccl-tests output, cross-check the figures and give a verdict."""
    from benchmarks.record import write_record
    from benchmarks.vocab import parse_bytes
    from toolkit.bench.nccl.parse import parse_nccl_file
    from toolkit.bench.nccl.record import build_record, judge_runs

    try:
        limit = parse_bytes(max_bytes)
    except ValueError as exc:
        raise PctkError(str(exc), "write e.g. --max-bytes 2G") from None
    runs = [r for f in files
            for r in parse_nccl_file(f, collective=collective, nranks=nranks, max_bytes=limit)]
    verdicts = judge_runs(runs, instance_type=instance_type, nodes=nodes,
                          expected_ranks=expect_ranks)
    rec = build_record("nccl-tests", runs, verdicts,
                       params={"files": [str(f) for f in files], "collective": collective,
                               "instance_type": instance_type, "nodes": nodes,
                               "expect_ranks": expect_ranks},
                       raw_logs=[os.path.relpath(f, out.parent) if out else str(f)
                                 for f in files],
                       cluster={"instance_type": instance_type, "nodes": nodes},
                       from_log=True)
    if out:
        write_record(out, rec)
    show_runs(runs, verdicts, rec, as_json, csv_path, plot_path)
    if store:
        from toolkit.results.ingest import store_finished_run

        store_finished_run(rec, db, logs=files)
    fail_if(rec["verdict"]["status"] == "FAIL")


@app.command()
def run(
    collectives: list[str] = RunCollectives,
    nodes: int = typer.Option(1, "--nodes", "-N"),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node"),
    launcher: str = typer.Option("srun", "--launcher", help="srun | mpirun | none"),
    partition: str = typer.Option(None, "--partition", "-p"),
    min_bytes: str = typer.Option("8", "--min-bytes", "-b"),
    max_bytes: str = typer.Option("16G", "--max-bytes", "-e"),
    iters: int = typer.Option(20, "--iters", "-n"),
    warmup: int = typer.Option(5, "--warmup", "-w"),
    nccl_tests_dir: str = typer.Option(None, "--nccl-tests-dir", envvar="NCCL_TESTS_DIR",
                                       help="Folder with the *_perf binaries."),
    env: list[str] = ExtraEnv,
    run_dir: Path | None = RunDir,
    old_out: Path | None = OldRunDir,
    instance_type: str = InstanceType,
    timeout: float = typer.Option(1800, "--timeout", help="Seconds per binary."),
    as_json: bool = JsonOption,
    store: bool = StoreOption,
    db: Path | None = DbOption,
) -> None:
    """Run nccl-tests binaries with the EFA environment, keep the logs, judge them."""
    from benchmarks.record import write_record
    from benchmarks.vocab import canonical_collective
    from toolkit.bench.nccl.parse import parse_nccl_file
    from toolkit.bench.nccl.record import build_record, judge_runs
    from toolkit.bench.nccl.runner import (
        LaunchSpec,
        build_command,
        find_binary,
        launch_env,
        run_logged,
    )

    out_dir = pick_alias(run_dir, old_out, "--run-dir", "--out") or new_run_dir("nccl-tests")
    extra = {}
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PctkError(f"--env {item!r} is not KEY=VALUE", "write --env NCCL_ALGO=Ring")
        extra[key] = value
    try:
        names = [canonical_collective(c) for c in collectives]
    except ValueError as exc:
        raise PctkError(str(exc), None) from None
    console = _console(as_json)
    runs, logs, commands = [], [], []
    for name in names:
        spec = LaunchSpec(name, nodes=nodes, gpus_per_node=gpus_per_node, launcher=launcher,
                          min_bytes=min_bytes, max_bytes=max_bytes, iters=iters,
                          warmup=warmup, partition=partition, extra_env=extra)
        cmd = build_command(spec, find_binary(name, nccl_tests_dir))
        log = out_dir / f"{name}.log"
        rows = 0
        console.print(f"{name}: {' '.join(cmd)}", markup=False, highlight=False)
        with ProgressLines(f"bench nccl run {name}") as bar:
            def progress(line: str, _bar: ProgressLines = bar) -> None:
                nonlocal rows
                if line.strip()[:1].isdigit() and ("sum" in line or "float" in line):
                    rows += 1
                    _bar.update(f"{rows} sizes done")
            outcome = run_logged(cmd, launch_env(spec), log, timeout=timeout,
                                 on_line=progress)
        try:
            found = parse_nccl_file(log, collective=name)
        except PctkError:
            from toolkit.bench.nccl.model import CollectiveRun

            found = [CollectiveRun(name, "given", source=str(log), failure_lines=[
                f"no nccl-tests output; exit status {outcome.returncode}"])]
        runs += found
        logs.append(log.name)
        commands.append(cmd)
    launched = nodes * gpus_per_node
    verdicts = judge_runs(runs, instance_type=instance_type, nodes=nodes,
                          expected_ranks=launched)
    rec = build_record("nccl-tests", runs, verdicts, raw_logs=logs, from_log=True,
                       params={"collectives": names, "nodes": nodes,
                               "gpus_per_node": gpus_per_node, "launcher": launcher,
                               "min_bytes": min_bytes, "max_bytes": max_bytes, "iters": iters,
                               "warmup": warmup, "commands": commands, "env": extra},
                       cluster={"instance_type": instance_type, "nodes": nodes,
                                "partition": partition})
    rec["software"]["source"] = "nccl-tests logs"
    write_record(out_dir / "record.json", rec)
    console.print(f"record: {out_dir / 'record.json'}")
    show_runs(runs, verdicts, rec, as_json)
    if store:
        from toolkit.results.ingest import store_finished_run

        store_finished_run(out_dir / "record.json", db)
    fail_if(rec["verdict"]["status"] == "FAIL")


@app.command()
def compare(
    before: Path = Before,
    after: Path = After,
    threshold: float | None = typer.Option(
        None, "--threshold", help="Flag a drop larger than this fraction (default: 0.05, "
        "as `pctk results compare`)."),
    min_bytes: str = typer.Option("1M", "--min-bytes",
                                  help="Only flag sizes at or above this (small = noisy); "
                                  "of those, the largest four that both runs measured."),
    collective: str = Collective,
    as_json: bool = JsonOption,
) -> None:
    """busbw change per size between two runs; exit 1 on a regression."""
    from rich.table import Table

    from benchmarks.vocab import parse_bytes
    from toolkit.bench.nccl.compare import compare_runs
    from toolkit.bench.nccl.record import load_runs
    from toolkit.bench.nccl.report import human_bytes
    from toolkit.results.compare import DEFAULT_THRESHOLD

    try:
        floor = parse_bytes(min_bytes)
    except ValueError as exc:
        raise PctkError(str(exc), "write e.g. --min-bytes 1M") from None
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    comps, unmatched = compare_runs(load_runs(before, collective=collective),
                                    load_runs(after, collective=collective),
                                    threshold=threshold, min_bytes=floor)
    if not comps:
        raise PctkError(f"nothing to compare between {before} and {after}"
                        + (f" ({'; '.join(unmatched)})" if unmatched else ""),
                        "compare runs of the same collective")
    regressed = any(c.regressions for c in comps)
    if as_json:
        emit_json({
            "threshold": threshold, "min_bytes": floor, "regression": regressed,
            "unmatched": unmatched,
            "collectives": [{"collective": c.collective, "sizes": [s.__dict__ for s in c.sizes],
                             "only_before": c.only_before, "only_after": c.only_after}
                            for c in comps]}, sort_keys=False)
    else:
        console = wide_console()
        for c in comps:
            t = Table(title=f"{c.collective}: busbw GB/s", box=None, title_justify="left")
            for col in ("size", "before", "after", "change", ""):
                t.add_column(col, justify="right")
            for s in c.sizes:
                flag = "[red]REGRESSION[/]" if s.regression else ""
                t.add_row(human_bytes(s.size_bytes), f"{s.before_gbps:.2f}",
                          f"{s.after_gbps:.2f}", f"{s.change:+.1%}", flag)
            console.print(t)
        for u in unmatched:
            console.print(f"note: {u}")
        console.print("[red]regression[/]" if regressed else "no regression beyond "
                      f"{threshold:.0%} at the largest sizes >= {human_bytes(floor)}")
    fail_if(regressed)


@app.command()
def plot(
    files: list[Path] = PlotFiles,
    out: Path = PlotPath,
    collective: str = Collective,
    as_json: bool = JsonOption,
) -> None:
    """PNG of busbw against message size (log2), several runs overlaid."""
    from toolkit.bench.nccl.record import load_runs
    from toolkit.bench.nccl.report import plot_busbw, run_title

    runs, labels = [], []
    for f in files:
        for r in load_runs(f, collective=collective):
            runs.append(r)
            labels.append(f"{f.name}: {run_title(r).split(' | ')[0]}")
    path = plot_busbw(out, runs, labels)
    if as_json:
        emit_json({"plot": str(path), "runs": len(runs)}, indent=None, sort_keys=False)
    else:
        typer.echo(f"wrote {path} ({len(runs)} runs)")

