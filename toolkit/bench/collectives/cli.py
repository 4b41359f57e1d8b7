"""``pctk bench collectives``: the torch.distributed sweep through Slurm.

Exit codes: 0 ok (PASS, WARN), 1 a verdict FAIL, 2 unusable input.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from toolkit.bench.nccl.report import show_runs
from toolkit.cliopts import DbOption, StoreOption, pick_alias
from toolkit.cliout import JsonOption, fail_if
from toolkit.errors import PctkError
from toolkit.paths import new_run_dir
from toolkit.progress import ProgressLines

InstanceType = typer.Option(None, "--instance-type", envvar="PCTK_INSTANCE_TYPE",
                            help="Instance type for the busbw expectation (catalog).")
SweepRunDir = typer.Option(None, "--run-dir", help="Folder for the job log and record.json "
                           "[<state home>/runs/collectives-TIME].")
OldRunDir = typer.Option(None, "--out", "-o", hidden=True, help="Deprecated: --run-dir.")
FromRecord = typer.Option(None, "--from-record",
                          help="Judge an existing record instead of submitting.")


def _console(as_json: bool) -> Console:
    # with --json, stdout carries only the JSON document
    return Console(stderr=True) if as_json else Console()


def collectives(
    nodes: int = typer.Option(2, "--nodes", "-N"),
    partition: str = typer.Option(None, "--partition", "-p"),
    ntasks_per_node: int = typer.Option(1, "--ntasks-per-node",
                                        help="Ranks per node (GPUs per node on GPU nodes)."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node"),
    ops: str = typer.Option("all_reduce,all_gather,reduce_scatter,all_to_all,broadcast",
                            "--ops"),
    min_bytes: str = typer.Option("1K", "--min-bytes"),
    max_bytes: str = typer.Option("64M", "--max-bytes"),
    iters: int = typer.Option(20, "--iters"),
    warmup: int = typer.Option(5, "--warmup"),
    emulate_missing: bool = typer.Option(False, "--emulate-missing",
                                         help="Emulate collectives gloo lacks (labelled)."),
    run_dir: Path | None = SweepRunDir,
    old_out: Path | None = OldRunDir,
    timeout: float = typer.Option(1800, "--timeout", help="Seconds to wait for the job."),
    from_record: Path = FromRecord,
    instance_type: str = InstanceType,
    as_json: bool = JsonOption,
    store: bool = StoreOption,
    db: Path | None = DbOption,
) -> None:
    """torch.distributed collective sweep through Slurm (sbatch/collectives.sbatch)."""
    from benchmarks.record import write_record
    from benchmarks.vocab import parse_bytes
    from toolkit.bench.collectives.driver import SweepJob, finish_sweep, judge_record, start_sweep

    console = _console(as_json)
    log: Path | None = None
    run_dir = pick_alias(run_dir, old_out, "--run-dir", "--out")
    if from_record:
        rec_path = from_record
    else:
        try:
            parse_bytes(min_bytes), parse_bytes(max_bytes)
        except ValueError as exc:
            raise PctkError(str(exc), "write sizes like 1K, 64M, 1G") from None
        out_dir = (run_dir or new_run_dir("collectives")).resolve()
        job = SweepJob(nodes=nodes, partition=partition, ntasks_per_node=ntasks_per_node,
                       gpus_per_node=gpus_per_node, ops=ops, min_bytes=min_bytes,
                       max_bytes=max_bytes, iters=iters, warmup=warmup,
                       emulate_missing=emulate_missing)
        job_id, cmd = start_sweep(job, out_dir)
        console.print(f"submitted job {job_id}: {' '.join(cmd)}", markup=False,
                      highlight=False)
        with ProgressLines("bench collectives") as progress:
            rec_path, log = finish_sweep(job_id, out_dir, timeout=timeout, on_state=lambda s:
                                         progress.update(f"job {job_id}: {s}"))
    rec, runs, verdicts = judge_record(rec_path, log, instance_type)
    if not from_record:
        write_record(rec_path, rec)
    show_runs(runs, verdicts, rec, as_json)
    if store and not from_record:  # an existing record is stored with `pctk results add`
        from toolkit.results.ingest import store_finished_run

        store_finished_run(rec_path, db)
    fail_if(rec["verdict"]["status"] == "FAIL")
