"""Two Slurm calls every launcher needs: submit a batch script, and ask a job's state.

``job_state`` makes one call per question and works with or without accounting: ``sacct``
when it answers on this cluster, else ``squeue --states=all`` (which still knows jobs that
ended within ``MinJobAge``).
"""

from __future__ import annotations

import os
import subprocess

from toolkit.errors import PctkError
from toolkit.submit.watcher import accounting_available


def sbatch(args: list[str], *, env: dict[str, str] | None = None,
           cwd: str | os.PathLike[str] | None = None) -> str:
    """``sbatch --parsable ARGS``; returns the job id or raises a one-line PctkError."""
    try:
        r = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True,
                           env=env, cwd=cwd, timeout=60)
    except FileNotFoundError:
        raise PctkError("sbatch not found", "run on a Slurm login node, or start the twin "
                        "(`pctk local up`) and `eval \"$(pctk local env)\"`") from None
    except subprocess.TimeoutExpired:
        raise PctkError("sbatch did not answer within 60 s", "is slurmctld up? (sinfo)") from None
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        msg = lines[-1].removeprefix("sbatch: error: ") if lines else f"exit {r.returncode}"
        raise PctkError(f"sbatch refused the job: {msg}",
                        "check the partition, node count and GPUs against `sinfo`")
    job_id = r.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise PctkError(f"sbatch printed no job id: {r.stdout.strip()!r}")
    return job_id


def job_state(job_id: str) -> str | None:
    """The job's state (``PENDING``, ``COMPLETED``, ``CANCELLED``...), or None if Slurm does
    not know it (not yet in the accounting database, or purged from the controller)."""
    if accounting_available():
        argv = ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State"]
    else:
        argv = ["squeue", "--states=all", "-h", "-j", job_id, "-o", "%T"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    states = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
    return states[-1] if r.returncode == 0 and states else None
