"""``pctk bench collectives``: the torch.distributed sweep through Slurm. Flags in, one
call of :mod:`toolkit.bench.collectives.driver`, tables or JSON out.

Exit codes: 0 ok (PASS, WARN), 1 a verdict FAIL, 2 unusable input.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from toolkit.api import benchmarks as api
from toolkit.bench.collectives.driver import judge_sweep_record
from toolkit.bench.comm.report import show_runs
from toolkit.cliopts import DbOption, StoreOption, pick_alias
from toolkit.cliout import JsonOption, fail_if
from toolkit.cliout import console as cli_console
from toolkit.results.ingest import store_finished_run
from toolkit.results.nextstep import next_step
from toolkit.submit.longrun import long_command

InstanceType = typer.Option(None, "--instance-type", envvar="PCTK_INSTANCE_TYPE",
                            help="Instance type for the busbw expectation (catalog).")
SweepRunDir = typer.Option(None, "--run-dir", help="Folder for the job log and record.json "
                           "[<state home>/runs/collectives-TIME].")
OldRunDir = typer.Option(None, "--out", "-o", hidden=True, help="Deprecated: --run-dir.")
FromRecord = typer.Option(None, "--from-record",
                          help="Judge an existing record instead of submitting.")


def _console(as_json: bool) -> Console:
    # with --json, stdout carries only the JSON document
    return cli_console(stderr=True) if as_json else cli_console()


def collectives(
    nodes: int = typer.Option(2, "--nodes", "-N", min=1),
    partition: str = typer.Option(None, "--partition", "-p"),
    ntasks_per_node: int = typer.Option(1, "--ntasks-per-node",
                                        help="Ranks per node (GPUs per node on GPU nodes)."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node"),
    ops: str = typer.Option(api.DEFAULT_OPS, "--ops"),
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
    with long_command():
        console = _console(as_json)
        run_dir = pick_alias(run_dir, old_out, "--run-dir", "--out")
        if from_record:
            res = judge_sweep_record(from_record, instance_type)
        else:
            def submitted(job_id: str, cmd: list[str]) -> None:
                console.print(f"submitted job {job_id}: {' '.join(cmd)}", markup=False,
                              highlight=False)

            res = api.bench_collectives(
                nodes, partition=partition, ntasks_per_node=ntasks_per_node,
                gpus_per_node=gpus_per_node, ops=ops, min_bytes=min_bytes, max_bytes=max_bytes,
                iters=iters, warmup=warmup, emulate_missing=emulate_missing, run_dir=run_dir,
                timeout=timeout, instance_type=instance_type, store=False,
                on_submit=submitted).detail
        show_runs(res.runs, res.verdicts, res.record, as_json)
        if store and not from_record:  # an existing record is stored with `pctk results add`
            store_finished_run(res.record_path, db)
        if not as_json:
            console.print(next_step(res.record), markup=False, highlight=False)
        fail_if(res.failed)
