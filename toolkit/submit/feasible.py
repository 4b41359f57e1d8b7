"""Refuse, before submitting, a job its partition can never run.

Slurm accepts such a job and leaves it pending forever (reason PartitionConfig) unless
EnforcePartLimits is set; ``sbatch --test-only`` asks the scheduler instead, without
submitting, and fails at once when no set of the partition's nodes could ever hold the job.

``--test-only`` leaves out nodes that are down, drained or not responding, and says
"Requested node configuration is not available" whether a node is gone for an hour or the
job asks for more than any node has. So when it refuses and some of the partition's nodes
are unavailable, the job is judged against every node's configured shape (CPUs, memory,
GPUs, as sinfo reports them whatever the state): if enough nodes could hold it once they are
back, it is submitted and :func:`check_satisfiable` says which nodes it waits for.
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


# node states (sinfo %T, lower case) in which the scheduler can place a job; a trailing *
# (not responding) makes any of them unavailable. Powered-down cloud nodes (~) count: the
# scheduler powers them up for the job.
_AVAILABLE = ("idle", "mixed", "allocated", "completing", "planned", "reserved")


def available(state: str) -> bool:
    return "*" not in state and state.rstrip("~#!%@^-+$").lower() in _AVAILABLE


def _per_node(sbatch_args: list[str]) -> tuple[int, int, int, int]:
    """(nodes, CPUs, MiB of memory, GPUs) a job asks of each node, from --key=value options."""
    opts = dict(a[2:].split("=", 1) for a in sbatch_args if a.startswith("--") and "=" in a)

    def num(key: str, default: int) -> int:
        value = opts.get(key, "")
        return int(value) if value.isdigit() else default

    gpus = num("gpus-per-node", 0)
    gres = opts.get("gres", "")
    if gres.startswith("gpu:") and gres.rsplit(":", 1)[-1].isdigit():
        gpus = max(gpus, int(gres.rsplit(":", 1)[-1]))
    mem = opts.get("mem", "")
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    mib = 0
    if mem[:-1].isdigit() and mem[-1].upper() in units:
        mib = int(int(mem[:-1]) * units[mem[-1].upper()])
    elif mem.isdigit():
        mib = int(mem)
    return (num("nodes", 1), num("ntasks-per-node", 1) * num("cpus-per-task", 1), mib, gpus)


def waits_for_unavailable(sbatch_args: list[str], partition: str) -> list[dict[str, str]] | None:
    """The partition's unavailable nodes when enough of all its nodes, as configured, could
    hold the job (it only waits for them); None when the configuration can never hold it."""
    nodes = slurm.partition_nodes(partition)
    down = [n for n in nodes if not available(n["state"])]
    if not down:
        return None
    count, cpus, mib, gpus = _per_node(sbatch_args)

    def fits(n: dict[str, str]) -> bool:
        have_cpus = int(n["cpus"]) if n["cpus"].isdigit() else 0
        have_mib = int(n["memory"]) if n["memory"].isdigit() else 0
        return (have_cpus >= cpus and (not mib or have_mib >= mib)
                and slurm.gres_gpus(n["gres"]) >= gpus)

    return down if sum(fits(n) for n in nodes) >= count else None


def describe_wait(down: list[dict[str, str]]) -> str:
    """``waits for nodes that are down: gpu-st-p5-2 (down*: Not responding)``."""
    shown = ", ".join(f"{n['name']} ({n['state']}" + (f": {n['reason']}" if n["reason"]
                                                      not in ("", "none") else "") + ")"
                      for n in down[:5])
    more = f" and {len(down) - 5} more" if len(down) > 5 else ""
    return f"the job may wait for nodes that are unavailable now: {shown}{more}"


def check_satisfiable(sbatch_args: list[str], partition: str) -> str | None:
    """Raise PctkError when ``sbatch --test-only`` with these options fails (no job is made)
    and the partition's configuration can never hold the job; returns a note naming the
    unavailable nodes when the job can run once they are back (None when nothing to say).

    ``sbatch_args``: the options a real submission would pass, without a script.
    """
    r = slurm.sbatch_test_only(sbatch_args)
    if r.returncode in (0, slurm.NO_ANSWER):
        return None  # accepted, or no sbatch or no answer: the real submission reports it
    lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
    reason = lines[-1] if lines else "sbatch --test-only failed"
    if any(t in reason.lower() for t in _TRANSIENT):
        return None
    for prefix in ("sbatch: error: ", "allocation failure: ", "Batch job submission failed: "):
        reason = reason.removeprefix(prefix)
    down = waits_for_unavailable(sbatch_args, partition)
    if down is not None:
        return describe_wait(down)
    raise PctkError(
        f"queue {partition} can never run this job ({partition_limits(partition)}): {reason}",
        "ask for fewer nodes, GPUs or CPUs per node (sbatch --test-only refused it)")
