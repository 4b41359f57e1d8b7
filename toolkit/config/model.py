"""The parts of a ParallelCluster v3 config that shape the Slurm cluster: queues and nodes.

This is deliberately lenient: it reads what the local twin and submission need and leaves
full validation to ``pctk config check``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.config.yamlio import load_yaml
from toolkit.errors import PctkError


@dataclass(frozen=True)
class ComputeResource:
    name: str
    instance_type: str
    min_count: int
    max_count: int
    efa: bool
    disable_hyperthreading: bool = False

    def node_names(self, queue: str, limit: int | None = None) -> list[str]:
        """ParallelCluster node names: static ``<q>-st-<cr>-<i>``, then ``<q>-dy-<cr>-<i>``."""
        total = self.max_count if limit is None else min(self.max_count, limit)
        static = min(self.min_count, total)
        names = [f"{queue}-st-{self.name}-{i}" for i in range(1, static + 1)]
        names += [f"{queue}-dy-{self.name}-{i}" for i in range(1, total - static + 1)]
        return names


@dataclass(frozen=True)
class Queue:
    name: str
    compute_resources: tuple[ComputeResource, ...]
    capacity_type: str = "ONDEMAND"


@dataclass(frozen=True)
class ClusterTopology:
    name: str
    source: str
    queues: tuple[Queue, ...]
    accounting: bool
    region: str | None = None
    # Scheduling/SlurmSettings/CustomSlurmSettings: cluster-level slurm.conf lines
    custom_slurm_settings: tuple[tuple[str, str], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def queue(self, name: str) -> Queue:
        for q in self.queues:
            if q.name == name:
                return q
        known = ", ".join(q.name for q in self.queues) or "none"
        raise PctkError(f"unknown queue {name!r}", f"the queues in {self.source} are: {known}")


_SLURM_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


def _int(value: Any, where: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise PctkError(f"{where}: expected an integer, got {value!r}")
    return value


def topology_from_dict(data: Any, source: str, name: str | None = None) -> ClusterTopology:
    if not isinstance(data, dict):
        raise PctkError(f"{source}: not a ParallelCluster config (expected a mapping at the top)")
    sched = data.get("Scheduling")
    if not isinstance(sched, dict) or sched.get("Scheduler", "slurm") != "slurm":
        raise PctkError(
            f"{source}: Scheduling.Scheduler must be slurm",
            "pctk works with Slurm clusters only",
        )
    raw_queues = sched.get("SlurmQueues")
    if not isinstance(raw_queues, list) or not raw_queues:
        raise PctkError(f"{source}: Scheduling.SlurmQueues is missing or empty")
    queues: list[Queue] = []
    for qi, rq in enumerate(raw_queues):
        qpath = f"{source}: Scheduling.SlurmQueues[{qi}]"
        if not isinstance(rq, dict) or not isinstance(rq.get("Name"), str):
            raise PctkError(f"{qpath}: a queue needs a Name")
        qname = rq["Name"]
        if not _SLURM_NAME.fullmatch(qname):
            raise PctkError(f"{qpath}.Name: {qname!r} is not a valid queue name",
                            "use lowercase letters, digits and '-', starting with a letter")
        crs: list[ComputeResource] = []
        raw_crs = rq.get("ComputeResources")
        if not isinstance(raw_crs, list) or not raw_crs:
            raise PctkError(f"{qpath}.ComputeResources: missing or empty")
        for ci, rc in enumerate(raw_crs):
            cpath = f"{qpath}.ComputeResources[{ci}]"
            if not isinstance(rc, dict) or not isinstance(rc.get("Name"), str):
                raise PctkError(f"{cpath}: a compute resource needs a Name")
            itype = rc.get("InstanceType")
            if itype is None and isinstance(rc.get("Instances"), list) and rc["Instances"]:
                first = rc["Instances"][0]
                itype = first.get("InstanceType") if isinstance(first, dict) else None
            if not isinstance(itype, str):
                raise PctkError(f"{cpath}: needs InstanceType (or Instances[0].InstanceType)")
            efa = rc.get("Efa") or {}
            crs.append(
                ComputeResource(
                    name=rc["Name"],
                    instance_type=itype,
                    min_count=_int(rc.get("MinCount"), f"{cpath}.MinCount", 0),
                    max_count=_int(rc.get("MaxCount"), f"{cpath}.MaxCount", 10),
                    efa=bool(isinstance(efa, dict) and efa.get("Enabled")),
                    disable_hyperthreading=bool(rc.get("DisableSimultaneousMultithreading")),
                )
            )
        queues.append(Queue(qname, tuple(crs), str(rq.get("CapacityType", "ONDEMAND"))))
    slurm_settings = sched.get("SlurmSettings") or {}
    accounting = isinstance(slurm_settings, dict) and bool(slurm_settings.get("Database"))
    region = data.get("Region") if isinstance(data.get("Region"), str) else None
    return ClusterTopology(
        name=name or Path(source).stem,
        source=source,
        queues=tuple(queues),
        accounting=accounting,
        region=region,
        custom_slurm_settings=_custom_settings(slurm_settings, source),
        extra={"raw": data},
    )


_SETTING_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


def _custom_settings(slurm_settings: Any, source: str) -> tuple[tuple[str, str], ...]:
    """``CustomSlurmSettings: [{MaxArraySize: 2001}, ...]`` as (key, value) pairs, checked so
    that nothing but one ``Key=Value`` line can come out of each entry."""
    raw = slurm_settings.get("CustomSlurmSettings") if isinstance(slurm_settings, dict) else None
    if raw is None:
        return ()
    where = f"{source}: Scheduling.SlurmSettings.CustomSlurmSettings"
    if not isinstance(raw, list):
        raise PctkError(f"{where}: expected a list of single-key mappings")
    out: list[tuple[str, str]] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise PctkError(f"{where}[{i}]: expected a mapping like {{MaxArraySize: 2001}}")
        for key, value in entry.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            if not isinstance(key, str) or not _SETTING_KEY.fullmatch(key):
                raise PctkError(f"{where}[{i}]: {key!r} is not a slurm.conf parameter name")
            if isinstance(value, (dict, list)) or "\n" in text or "\r" in text or not text:
                raise PctkError(f"{where}[{i}].{key}: the value must be one non-empty line")
            out.append((key, text))
    return tuple(out)


def load_topology(path: str | Path) -> ClusterTopology:
    """Read the queues and compute resources of a ParallelCluster v3 YAML file."""
    return topology_from_dict(load_yaml(path), str(path))
