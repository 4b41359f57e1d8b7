"""Slurm's view of the nodes (``sinfo``), and turning ``--nodes``/``--partition`` into a list."""

from __future__ import annotations

import re
from dataclasses import dataclass

from benchmarks.distenv import expand_hostlist
from toolkit import catalog, slurm
from toolkit.errors import PctkError

SINFO_FIELDS = "NodeList:|,Partition:|,StateComplete:|,Reason:|,Features:|,Gres:|"
UNRESPONSIVE_FLAGS = {"not_responding", "down", "future", "unknown", "fail", "powered_down",
                      "powering_down", "power_down", "no_respond"}
# Slurm starts no new job on a node with one of these (DOWN: it stopped answering for
# SlurmdTimeout, or an admin set it down); a mere not_responding may be a late ping
NO_NEW_JOBS_FLAGS = {"down", "drain", "drained", "draining", "fail", "failing"}
PCTK_REASON = "pctk:"


class HealthInputError(PctkError):
    """Bad selection for ``pctk health run``: Nagios UNKNOWN (3), nothing could be checked."""

    exit_code = 3


def not_swept(node: SlurmNode) -> str | None:
    """Why a sweep (``health run``, ``health slow-nodes``) leaves a selected node out without a
    verdict, or None. One rule for both: a powered-down dynamic node (``idle~``) is not running,
    which is its normal state between jobs; it is skipped and said so, never FAILed."""
    if node.powered_down:
        return f"{node.state}: powered down (dynamic node not running)"
    return None


@dataclass(frozen=True)
class SlurmNode:
    name: str
    partitions: tuple[str, ...]
    state: str  # sinfo StateComplete, e.g. "idle+drain" or "down+not_responding"
    reason: str
    features: tuple[str, ...]
    gres: str

    @property
    def flags(self) -> set[str]:
        return set(self.state.lower().split("+"))

    @property
    def responsive(self) -> bool:
        return not (self.flags & UNRESPONSIVE_FLAGS)

    @property
    def takes_no_jobs(self) -> bool:
        return bool(self.flags & NO_NEW_JOBS_FLAGS)

    @property
    def powered_down(self) -> bool:
        return bool(self.flags & {"powered_down", "powering_down", "power_down"})

    @property
    def drained(self) -> bool:
        return bool(self.flags & {"drain", "drained", "draining"})

    @property
    def drained_by_pctk(self) -> bool:
        return self.drained and self.reason.startswith(PCTK_REASON)

    @property
    def gpu_count(self) -> int:
        m = re.search(r"gpu(?::[^:,(]+)?:(\d+)", self.gres)
        return int(m.group(1)) if m else 0

    @property
    def instance_type(self) -> str | None:
        """ParallelCluster lists the EC2 instance type among a node's features."""
        return next((f for f in self.features if catalog.find(f) is not None), None)


def parse_sinfo(text: str) -> dict[str, SlurmNode]:
    """Nodes from ``sinfo -N -h -O SINFO_FIELDS``; a node in two partitions is listed twice."""
    nodes: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 6 or not parts[0]:
            continue
        name, part, state, reason, feats, gres = (p.strip() for p in parts[:6])
        part = part.rstrip("*")
        reason = "" if reason == "none" else reason
        if name in nodes:
            old = nodes[name]
            nodes[name] = SlurmNode(name, (*old.partitions, part), old.state, old.reason,
                                    old.features, old.gres)
            continue
        nodes[name] = SlurmNode(name, (part,), state, reason,
                                tuple(f for f in feats.split(",") if f and f != "(null)"),
                                "" if gres == "(null)" else gres)
    return nodes


def read_nodes() -> dict[str, SlurmNode]:
    return parse_sinfo(slurm.sinfo_nodes(SINFO_FIELDS))


def partitions_of(nodes: dict[str, SlurmNode]) -> list[str]:
    return list(dict.fromkeys(p for n in nodes.values() for p in n.partitions))


def _listing(names: list[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def select_nodes(nodes: dict[str, SlurmNode], node_list: str | None = None,
                 partition: str | None = None) -> list[SlurmNode]:
    """The nodes named by ``--nodes`` (a Slurm host list) and/or ``--partition``."""
    parts = partitions_of(nodes)
    if partition is not None and partition not in parts:
        raise HealthInputError(f"unknown partition {partition!r}",
                               f"partitions here: {', '.join(parts)}")
    pool = [n for n in nodes.values() if partition is None or partition in n.partitions]
    if node_list is None:
        if not pool:
            raise HealthInputError(f"partition {partition!r} has no nodes")
        return pool
    try:
        wanted = expand_hostlist(node_list)
    except ValueError as exc:
        raise HealthInputError(f"bad node list {node_list!r}: {exc}") from None
    pool_names = {n.name for n in pool}
    unknown = [w for w in wanted if w not in pool_names]
    if unknown:
        where = f" in partition {partition}" if partition else ""
        raise HealthInputError(
            f"unknown node{'s' if len(unknown) > 1 else ''}{where}: {_listing(unknown, 5)}",
            f"nodes here: {_listing(sorted(pool_names))}")
    return [nodes[w] for w in dict.fromkeys(wanted)]
