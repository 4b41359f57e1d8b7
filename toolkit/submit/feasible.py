"""Refuse, before submitting, a job its partition can never run.

Slurm accepts such a job and leaves it pending forever (reason PartitionConfig) unless
EnforcePartLimits is set; ``sbatch --test-only`` asks the scheduler instead, without
submitting, and fails at once when no set of the partition's nodes could ever hold the job.
"""

from __future__ import annotations

from toolkit import slurm
from toolkit.errors import PctkError

# answers that say nothing about the job itself: leave the decision to the real sbatch
_TRANSIENT = ("unable to contact", "socket timed out", "communication connection failure",
              "slurm_load_partitions", "temporarily unavailable", "zero bytes were transmitted")


def partition_limits(partition: str) -> str:
    """``gpu has 2 nodes`` (with ``, at most N per job`` when MaxNodes is set)."""
    fields = slurm.partition_fields(partition)
    if fields is None:
        return f"see `sinfo -p {partition}`"
    text = f"{partition} has {fields.get('TotalNodes', '?')} nodes"
    max_nodes = fields.get("MaxNodes", "UNLIMITED")
    if max_nodes not in ("UNLIMITED", "", "?"):
        text += f", at most {max_nodes} per job"
    return text


def check_satisfiable(sbatch_args: list[str], partition: str) -> None:
    """Raise PctkError when ``sbatch --test-only`` with these options fails (no job is made).

    ``sbatch_args``: the options a real submission would pass, without a script.
    """
    r = slurm.sbatch_test_only(sbatch_args)
    if r.returncode in (0, slurm.NO_ANSWER):
        return  # accepted, or no sbatch or no answer: the real submission reports it
    lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
    reason = lines[-1] if lines else "sbatch --test-only failed"
    if any(t in reason.lower() for t in _TRANSIENT):
        return
    for prefix in ("sbatch: error: ", "allocation failure: ", "Batch job submission failed: "):
        reason = reason.removeprefix(prefix)
    raise PctkError(
        f"queue {partition} can never run this job ({partition_limits(partition)}): {reason}",
        "ask for fewer nodes, GPUs or CPUs per node (sbatch --test-only refused it)")
