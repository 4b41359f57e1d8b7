"""The few Slurm actions a sweep takes: submit, watch, cancel, drain, resume, reserve."""

from __future__ import annotations

import getpass
import re
import subprocess

from toolkit.errors import PctkError
from toolkit.health.inventory import run_slurm


def _check(r: subprocess.CompletedProcess[str], what: str) -> str:
    if r.returncode != 0:
        raise PctkError(f"{what} failed: {r.stderr.strip() or r.stdout.strip()}",
                        "check your Slurm permissions (drain/resume/reservations need an "
                        "operator or root)")
    return str(r.stdout)


def submit(argv: list[str]) -> str:
    """``sbatch --parsable ...``; returns the job id."""
    out = _check(run_slurm(["sbatch", "--parsable", *argv]), "sbatch")
    return out.strip().split(";")[0]


def job_state(job_id: str) -> tuple[str, str]:
    """(JobState, Reason) from slurmctld's memory (no accounting needed); ("GONE", "") if
    slurmctld has forgotten the job."""
    r = run_slurm(["scontrol", "show", "job", "-o", job_id])
    if r.returncode != 0:
        return "GONE", ""
    state = re.search(r"JobState=(\S+)", r.stdout)
    reason = re.search(r"Reason=(\S+)", r.stdout)
    return (state.group(1) if state else "UNKNOWN", reason.group(1) if reason else "")


def cancel(job_id: str) -> None:
    run_slurm(["scancel", job_id])


def drain(node: str, reason: str) -> None:
    _check(run_slurm(["scontrol", "update", f"NodeName={node}", "State=DRAIN",
                      f"Reason={reason}"]), f"drain {node}")


def resume(node: str) -> None:
    _check(run_slurm(["scontrol", "update", f"NodeName={node}", "State=RESUME"]),
           f"resume {node}")


def create_reservation(name: str, nodes: list[str], minutes: int) -> None:
    """A maintenance reservation so nodes resumed for a re-check take no one else's job."""
    _check(run_slurm(["scontrol", "create", "reservation", f"ReservationName={name}",
                      f"Nodes={','.join(nodes)}", "StartTime=now", f"Duration={minutes}",
                      f"Users={getpass.getuser()}", "Flags=MAINT,IGNORE_JOBS"]),
           f"create reservation {name}")


def delete_reservation(name: str) -> None:
    run_slurm(["scontrol", "delete", f"ReservationName={name}"])
