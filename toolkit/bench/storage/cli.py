"""The ``pctk bench storage`` command: flags in, one call of
:func:`toolkit.bench.storage.driver.bench_storage`, a table or JSON out."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from benchmarks.storage.aggregate import THROUGHPUT_PHASES
from toolkit.api import benchmarks as api
from toolkit.cliout import JsonOption, emit_json, fail_if
from toolkit.cliout import console as cli_console
from toolkit.results.ingest import store_finished_run
from toolkit.results.nextstep import next_step
from toolkit.submit.longrun import long_command
from toolkit.twinnote import twin_caveat


def _cell(value: float | None, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, int | float) else "-"


def throughput_phases(metrics: dict[str, Any]) -> list[str]:
    """The throughput phases a record holds, each followed by its other block sizes."""
    return [name for phase in THROUGHPUT_PHASES for name in metrics
            if name == phase or name.startswith(phase + "@")]


def table_rows(rec: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(phase, aggregate, slowest node, per-node range) for each measured phase."""
    m, rows = rec["metrics"], []
    for phase in throughput_phases(m):
        if phase in m:
            rates = [n["mb_per_s"] for n in m[phase]["per_node"].values()]
            block = m[phase].get("block")
            rows.append((f"{phase} ({block})" if block and "@" not in phase else phase,
                         f"{_cell(m[phase]['mb_per_s'], ',.0f')} MB/s",
                         f"{m[phase]['slowest_node_s']:.2f} s",
                         f"{min(rates):,.0f}-{max(rates):,.0f} MB/s"))
    if "rand_read" in m:
        r = m["rand_read"]
        iops = [n["iops"] for n in r["per_node"].values()]
        if r.get("lat_p99_us") is not None:  # over all nodes' I/Os (merged histograms)
            lat = (f"p50 {_cell(r['lat_p50_us'], '.0f')} us, p99 "
                   f"{_cell(r['lat_p99_us'], '.0f')} us")
        else:  # a record without histograms: say which per-node figures these are
            lat = (f"median node's p50 {_cell(r['lat_p50_us_median_node'], '.0f')} us, "
                   f"worst node's p99 {_cell(r['lat_p99_us_worst_node'], '.0f')} us")
        rows.append(("rand_read 4k", f"{_cell(r['iops'], ',.0f')} IOPS, {lat}",
                     f"{r['slowest_node_s']:.2f} s", f"{min(iops):,.0f}-{max(iops):,.0f} IOPS"))
    for phase in ("meta_create", "meta_stat", "meta_remove"):
        if phase in m:
            per = [n["per_s"] or 0 for n in m[phase]["per_node"].values()]
            rows.append((phase, f"{_cell(m[phase]['per_s'], ',.0f')} files/s",
                         f"{m[phase]['slowest_node_s']:.2f} s",
                         f"{min(per):,.0f}-{max(per):,.0f} files/s"))
    return rows


def print_table(rec: dict[str, Any]) -> None:
    p = rec["params"]
    direct = "direct I/O" if rec["metrics"].get("direct_io") else "buffered (no O_DIRECT)"
    table = Table(title=f"pctk bench storage: {p['target']}, {p['nodes']} node(s) x "
                        f"{p['jobs_per_node']} jobs, {direct}")
    for name in ("phase", "aggregate (stonewall)", "slowest node", "per node"):
        table.add_column(name)
    for row in table_rows(rec):
        table.add_row(*row)
    console = cli_console()
    console.print(table)
    console.print(f"verdict: {rec['verdict']['status']}", highlight=False)
    for reason in rec["verdict"]["reasons"]:
        console.print(f"  {reason}", highlight=False)
    if caveat := twin_caveat(rec):  # "255% of expected" on the twin is the local disk's
        console.print(f"  {caveat}", highlight=False)


def storage_command(
    nodes: int = typer.Option(1, "--nodes", "-N", help="Nodes that do I/O at once."),
    target: str | None = typer.Option(
        None, help="Folder on the shared file system (default: first SharedStorage MountDir of "
                   "--config); %n is the node name."),
    config: Annotated[str | None, typer.Option(
        "--config", "-c", help="Cluster config, a file or a preset name: default target and "
        "provisioned throughput (default: the running twin's or the head node's config)."
    )] = None,
    instance_type: str | None = typer.Option(
        None, help="Instance type in the catalog: each client's network ceiling "
                   "(default: the nodes' Slurm feature)."),
    jobs_per_node: int = typer.Option(8, help="fio processes (ranks) per node."),
    size_mib: int = typer.Option(1024, help="MiB per process, sequential phases."),
    ckpt_mib: int = typer.Option(1024, help="MiB shard per rank, checkpoint phase."),
    rand_seconds: int = typer.Option(10, help="Seconds of random 4 KiB reads."),
    meta_files: int = typer.Option(1000, help="Files per node, metadata phase."),
    phases: str = typer.Option("seq,rand,shared,ckpt,meta", help="Phases to run."),
    block_sizes: str = typer.Option(
        "1M", help="Block sizes of the sequential, shared-file and checkpoint phases, e.g. "
                   "1M,4M: each phase runs at each size (the first gives the plain phase "
                   "names, the others seq_read@4M...)."),
    direct: bool = typer.Option(True, "--direct/--no-direct",
                                help="O_DIRECT where the mount allows it (probed)."),
    partition: str | None = typer.Option(None, "--partition", "-p", help="Slurm partition."),
    time_limit: str | None = typer.Option(None, "--time", help="Slurm time limit."),
    share_timeout: float = typer.Option(
        30.0, help="Seconds for every node to see the others' marker files."),
    run_dir: Annotated[Path | None, typer.Option(
        help="Shared folder for the job's log, fio reports and record.")] = None,
    timeout: float | None = typer.Option(None, help="Give up waiting after this many s."),
    store: bool = typer.Option(True, "--store/--no-store",
                               help="Add the record and fio reports to the results database."),
    db: Path | None = typer.Option(None, "--db", envvar="PCTK_RESULTS_DB",
                                   help="Results database file (default: <state home>/"
                                        "results.db)."),
    as_json: bool = JsonOption,
) -> None:
    """Shared file system throughput, IOPS and metadata rates from N nodes at once (fio)."""
    with long_command():
        console = cli_console(stderr=True, quiet=as_json)
        start = time.monotonic()
        with console.status(f"storage benchmark on {nodes} node(s): submitting") as status:
            res = api.bench_storage(
                nodes, target=target, config=config, instance_type=instance_type,
                jobs_per_node=jobs_per_node, size_mib=size_mib, ckpt_mib=ckpt_mib,
                rand_seconds=rand_seconds, meta_files=meta_files, phases=phases,
                block_sizes=block_sizes, direct=direct, partition=partition,
                time_limit=time_limit, share_timeout=share_timeout, run_dir=run_dir,
                timeout=timeout, progress=False, store=False,
                on_state=lambda state: status.update(
                    f"storage benchmark: job {state} ({time.monotonic() - start:.0f}s)")
            ).detail
        if store:  # the record (and the fio reports it names) is in the run folder already
            stored = store_finished_run(res.record_path, db)
            res.stored = stored.id if stored else None
        if as_json:
            emit_json(res.record)
        else:
            print_table(res.record)
            typer.echo(f"record: {res.record_path}")
            if res.stored:
                typer.echo(f"stored as {res.stored}")
            typer.echo(next_step(res.record))
        fail_if(res.failed)
