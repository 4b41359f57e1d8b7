"""Submit the torch.distributed sweep through Slurm, wait for it, judge its record.

:func:`run_sweep` (and :func:`judge_sweep_record` for a record already made) is what
``pctk bench collectives`` calls; the steps below it are public for Python callers.

A plain ``sbatch`` of ``sbatch/collectives.sbatch`` (the script a researcher can also submit
by hand), then one state query per poll through :mod:`toolkit.slurm` (sacct, or
``squeue --states=all`` on clusters without accounting).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.record import read_record, write_record
from benchmarks.vocab import parse_bytes
from toolkit import slurm
from toolkit.bench.comm.model import CollectiveRun
from toolkit.bench.comm.network import detect_network
from toolkit.bench.comm.record import judge_runs, runs_from_record
from toolkit.bench.comm.verdict import Verdict, worst
from toolkit.errors import PctkError
from toolkit.paths import code_root, new_run_dir, sbatch_script
from toolkit.submit.jobspec import JobSpec, sbatch_options

REPO = code_root()
SBATCH_SCRIPT = sbatch_script("collectives.sbatch")

@dataclass
class SweepJob:
    nodes: int = 2
    partition: str | None = None
    ntasks_per_node: int = 1
    gpus_per_node: int | None = None
    ops: str = "all_reduce,all_gather,reduce_scatter,all_to_all,broadcast"
    min_bytes: str = "1K"
    max_bytes: str = "64M"
    iters: int = 20
    warmup: int = 5
    time_limit: str | None = None
    emulate_missing: bool = False


def sbatch_command(job: SweepJob, out_dir: Path) -> list[str]:
    spec = JobSpec(nodes=job.nodes, ntasks_per_node=job.ntasks_per_node,
                   gpus_per_node=job.gpus_per_node or None, partition=job.partition,
                   time=job.time_limit, output=str(out_dir / "slurm-%j.out"), chdir=str(REPO),
                   export="ALL")
    args = ["--ops", job.ops, "--min-bytes", job.min_bytes, "--max-bytes", job.max_bytes,
            "--iters", str(job.iters), "--warmup", str(job.warmup),
            "--out", str(out_dir / "record.json")]
    if job.emulate_missing:
        args.append("--emulate-missing")
    return slurm.sbatch_command(SBATCH_SCRIPT, *sbatch_options(spec), script_args=args)


def sweep_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The job runs this repo's code with this interpreter (the venv's python)."""
    env = dict(os.environ if base is None else base)
    env["PCTK_PYTHON"] = sys.executable
    env["PCTK_REPO"] = str(REPO)
    return env


def submit(cmd: list[str], env: dict[str, str]) -> str:
    """Submit ``sbatch_command``'s argument list; returns the job id."""
    return slurm.submit(cmd, env=env)


def start_sweep(job: SweepJob, out_dir: Path) -> tuple[str, list[str]]:
    """Submit the sweep into ``out_dir``; returns the job id and the sbatch command."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = sbatch_command(job, out_dir)
    return submit(cmd, sweep_env()), cmd


def finish_sweep(job_id: str, out_dir: Path, *, timeout: float,
                 on_state: Callable[[str], None] | None = None) -> tuple[Path, Path]:
    """Wait for the sweep; returns its record and the job's log. A job that ends without a
    record is a one-line PctkError with the log's last lines."""
    state = wait_for_job(job_id, timeout=timeout, on_state=on_state)
    rec_path = out_dir / "record.json"
    log = out_dir / f"slurm-{job_id}.out"
    if not rec_path.is_file():
        tail = log.read_text(errors="replace").splitlines()[-5:] if log.is_file() else []
        raise PctkError(f"job {job_id} ended {state} without a record at {rec_path}",
                        "read the job log" + (": " + " / ".join(tail) if tail else ""),
                        log=str(log))
    return rec_path, log


def judge_record(rec_path: Path, log: Path | None, instance_type: str | None
                 ) -> tuple[dict[str, Any], list[CollectiveRun], list[Verdict]]:
    """The record with each collective judged against the catalog, the network the job's
    log shows, and the node side's own verdict kept: (record, runs, verdicts)."""
    try:
        rec = read_record(rec_path)
    except (OSError, ValueError) as exc:
        raise PctkError(f"cannot read {rec_path}: {exc}", "pass a collectives record") from None
    runs = runs_from_record(rec)
    if log and log.is_file():
        net = detect_network(log.read_text(errors="replace").splitlines())
        for r in runs:
            r.network = net
        rec["raw_logs"] = sorted({*rec.get("raw_logs", []), log.name})
    verdicts = judge_runs(runs, instance_type=instance_type,
                          nodes=rec.get("cluster", {}).get("nodes"))
    node_status = rec["verdict"]["status"]
    for block, v in zip(rec["metrics"]["collectives"], verdicts, strict=True):
        block["verdict"] = v.to_dict()
        block["network"] = {"transport": runs[0].network.transport,
                            "evidence": runs[0].network.evidence}
    rec["verdict"] = {"status": worst([node_status, *(v.status for v in verdicts)]),
                      "reasons": rec["verdict"]["reasons"] + [
                          f"{r.collective}: {x}" for r, v in zip(runs, verdicts, strict=True)
                          for x in v.reasons]}
    return rec, runs, verdicts


def wait_for_job(job_id: str, *, timeout: float, poll: float = 2.0,
                 on_state: Callable[[str], None] | None = None) -> str:
    """Poll until a terminal state; 'GONE' when Slurm forgot a job it had shown."""
    return slurm.wait_job(job_id, timeout=timeout, poll=poll, on_state=on_state)


@dataclass
class SweepResult:
    """The judged record, its runs and verdicts, and the files they came from."""
    runs: list[CollectiveRun]
    verdicts: list[Verdict]
    record: dict[str, Any]
    record_path: Path
    log: Path | None = None

    @property
    def failed(self) -> bool:
        return bool(self.record["verdict"]["status"] == "FAIL")


def validate(job: SweepJob) -> None:
    """Refuse sizes the node side would refuse, before anything is submitted."""
    try:
        parse_bytes(job.min_bytes), parse_bytes(job.max_bytes)
    except ValueError as exc:
        raise PctkError(str(exc), "write sizes like 1K, 64M, 1G") from None


def run_sweep(job: SweepJob, *, run_dir: Path | None = None, timeout: float = 1800,
              instance_type: str | None = None,
              on_submit: Callable[[str, list[str]], None] | None = None,
              on_state: Callable[[str, str], None] | None = None) -> SweepResult:
    """Submit the sweep into ``run_dir`` (default: a new run folder), wait, judge the
    record against the catalog and write it back. ``on_submit(job_id, sbatch command)``
    once the job is queued, ``on_state(job_id, state)`` on every state it passes."""
    validate(job)
    out_dir = (run_dir or new_run_dir("collectives")).resolve()
    job_id, cmd = start_sweep(job, out_dir)
    if on_submit:
        on_submit(job_id, cmd)
    rec_path, log = finish_sweep(job_id, out_dir, timeout=timeout, on_state=(
        (lambda state: on_state(job_id, state)) if on_state else None))
    rec, runs, verdicts = judge_record(rec_path, log, instance_type)
    write_record(rec_path, rec)
    return SweepResult(runs, verdicts, rec, rec_path, log)


def judge_sweep_record(rec_path: Path, instance_type: str | None = None) -> SweepResult:
    """Judge a collectives record made earlier; the file is left as it is."""
    rec, runs, verdicts = judge_record(rec_path, None, instance_type)
    return SweepResult(runs, verdicts, rec, rec_path)
