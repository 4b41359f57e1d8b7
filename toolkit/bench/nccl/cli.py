"""``pctk bench nccl run|parse|compare|plot``: flags in, one call of
:mod:`toolkit.bench.nccl.driver`, tables or JSON out.

Exit codes: 0 ok (PASS, WARN), 1 a verdict FAIL or a regression, 2 unusable input.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from benchmarks.vocab import parse_bytes
from toolkit.bench.comm.report import human_bytes, show_runs, wide_console
from toolkit.bench.nccl import driver
from toolkit.cliopts import DbOption, StoreOption, pick_alias
from toolkit.cliout import JsonOption, emit_json, fail_if
from toolkit.cliout import console as cli_console
from toolkit.errors import PctkError
from toolkit.results.compare import DEFAULT_THRESHOLD
from toolkit.results.ingest import store_finished_run
from toolkit.results.nextstep import next_step

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
    return cli_console(stderr=True) if as_json else cli_console()


def _byte_size(text: str, hint: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise PctkError(str(exc), hint) from None


def _env_pairs(items: list[str]) -> dict[str, str]:
    extra = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PctkError(f"--env {item!r} is not KEY=VALUE", "write --env NCCL_ALGO=Ring")
        extra[key] = value
    return extra


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
    limit = _byte_size(max_bytes, "write e.g. --max-bytes 2G")
    res = driver.parse_logs(files, collective=collective, nranks=nranks,
                            instance_type=instance_type, nodes=nodes,
                            expected_ranks=expect_ranks, max_bytes=limit, out=out)
    show_runs(res.runs, res.verdicts, res.record, as_json, csv_path, plot_path)
    if store:
        store_finished_run(res.record, db, logs=files)
    fail_if(res.failed)


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
    # imported here: not for `nccl parse`
    from toolkit.api import benchmarks as api
    from toolkit.submit.longrun import long_command

    with long_command():
        out_dir = pick_alias(run_dir, old_out, "--run-dir", "--out")
        extra = _env_pairs(env)
        console = _console(as_json)

        def launched(name: str, cmd: list[str]) -> None:
            console.print(f"{name}: {' '.join(cmd)}", markup=False, highlight=False)

        res = api.bench_nccl(
            collectives, nodes=nodes, gpus_per_node=gpus_per_node, launcher=launcher,
            partition=partition, min_bytes=min_bytes, max_bytes=max_bytes, iters=iters,
            warmup=warmup, nccl_tests_dir=nccl_tests_dir, env=extra, run_dir=out_dir,
            instance_type=instance_type, timeout=timeout, store=False,
            on_launch=launched).detail
        console.print(f"record: {res.record_path}")
        show_runs(res.runs, res.verdicts, res.record, as_json)
        if store and res.record_path:
            store_finished_run(res.record_path, db)
        if not as_json and res.record:
            console.print(next_step(res.record), markup=False, highlight=False)
        fail_if(res.failed)


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
    floor = _byte_size(min_bytes, "write e.g. --min-bytes 1M")
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    comps, unmatched = driver.compare_files(before, after, collective=collective,
                                            threshold=threshold, min_bytes=floor)
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
    path, count = driver.plot_files(files, out, collective=collective)
    if as_json:
        emit_json({"plot": str(path), "runs": count}, indent=None, sort_keys=False)
    else:
        typer.echo(f"wrote {path} ({count} runs)")
