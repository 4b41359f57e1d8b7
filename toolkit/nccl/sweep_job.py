"""Submit the torch.distributed sweep through Slurm, wait for it, judge its record.

A plain ``sbatch`` of ``sbatch/collectives.sbatch`` (the script a researcher can also submit
by hand), then one state query per poll through :mod:`toolkit.submit.slurm` (sacct, or
``squeue --states=all`` on clusters without accounting).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolkit.paths import code_root, sbatch_script
from toolkit.submit import slurm
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


def wait_for_job(job_id: str, *, timeout: float, poll: float = 2.0,
                 on_state: Callable[[str], None] | None = None) -> str:
    """Poll until a terminal state; 'GONE' when Slurm forgot a job it had shown."""
    return slurm.wait_job(job_id, timeout=timeout, poll=poll, on_state=on_state)
