"""Tolerant accessors over a raw ParallelCluster config dict (any part may be malformed)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from toolkit.config.findings import YamlPath

DEFAULT_MIN_COUNT = 0
DEFAULT_MAX_COUNT = 10  # ParallelCluster's default MaxCount


def dig(data: Any, *keys: str | int) -> Any:
    cur = data
    for key in keys:
        if isinstance(key, int):
            if not isinstance(cur, list) or key >= len(cur):
                return None
        elif not isinstance(cur, dict):
            return None
        cur = cur[key] if isinstance(key, int) else cur.get(key)
    return cur


def as_int(value: Any, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def _reservation_target(owner: dict[str, Any]) -> dict[str, Any] | None:
    target = owner.get("CapacityReservationTarget")
    if isinstance(target, dict) and (
        target.get("CapacityReservationId") or target.get("CapacityReservationResourceGroupArn")
    ):
        return target
    return None


@dataclass(frozen=True)
class QueueView:
    index: int
    raw: dict[str, Any]

    @property
    def path(self) -> YamlPath:
        return ("Scheduling", "SlurmQueues", self.index)

    @property
    def name(self) -> str:
        return str(self.raw.get("Name", f"#{self.index}"))

    @property
    def capacity_type(self) -> str:
        return str(self.raw.get("CapacityType", "ONDEMAND"))

    def placement_group_enabled(self) -> bool | None:
        enabled = dig(self.raw, "Networking", "PlacementGroup", "Enabled")
        return enabled if isinstance(enabled, bool) else None

    @property
    def reservation_target(self) -> dict[str, Any] | None:
        return _reservation_target(self.raw)

    def compute_resources(self) -> Iterator[CrView]:
        crs = self.raw.get("ComputeResources")
        if isinstance(crs, list):
            for ci, cr in enumerate(crs):
                if isinstance(cr, dict):
                    yield CrView(self, ci, cr)


@dataclass(frozen=True)
class CrView:
    queue: QueueView
    index: int
    raw: dict[str, Any]

    @property
    def path(self) -> YamlPath:
        return (*self.queue.path, "ComputeResources", self.index)

    @property
    def name(self) -> str:
        return str(self.raw.get("Name", f"#{self.index}"))

    @property
    def label(self) -> str:
        return f"{self.queue.name}/{self.name}"

    @property
    def instance_types(self) -> list[str]:
        if isinstance(self.raw.get("InstanceType"), str):
            return [self.raw["InstanceType"]]
        items = self.raw.get("Instances")
        if isinstance(items, list):
            return [i["InstanceType"] for i in items
                    if isinstance(i, dict) and isinstance(i.get("InstanceType"), str)]
        return []

    @property
    def min_count(self) -> int:
        return as_int(self.raw.get("MinCount"), DEFAULT_MIN_COUNT)

    @property
    def max_count(self) -> int:
        return as_int(self.raw.get("MaxCount"), DEFAULT_MAX_COUNT)

    @property
    def efa_enabled(self) -> bool:
        return dig(self.raw, "Efa", "Enabled") is True

    @property
    def reservation_target(self) -> dict[str, Any] | None:
        """The compute resource's own target, else the queue's (ParallelCluster's precedence)."""
        return _reservation_target(self.raw) or self.queue.reservation_target

    def placement_group_enabled(self) -> bool | None:
        enabled = dig(self.raw, "Networking", "PlacementGroup", "Enabled")
        if isinstance(enabled, bool):
            return enabled
        return self.queue.placement_group_enabled()

    def placement_group_explicit(self) -> bool:
        for owner in (self.raw, self.queue.raw):
            pg = dig(owner, "Networking", "PlacementGroup")
            if isinstance(pg, dict) and ("Enabled" in pg or "Id" in pg or "Name" in pg):
                return True
        return False


def queues(data: Any) -> Iterator[QueueView]:
    raw = dig(data, "Scheduling", "SlurmQueues")
    if isinstance(raw, list):
        for qi, q in enumerate(raw):
            if isinstance(q, dict):
                yield QueueView(qi, q)


def compute_resources(data: Any) -> Iterator[CrView]:
    for q in queues(data):
        yield from q.compute_resources()


def shared_storage(data: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    raw = data.get("SharedStorage") if isinstance(data, dict) else None
    if isinstance(raw, list):
        for i, s in enumerate(raw):
            if isinstance(s, dict):
                yield i, s
