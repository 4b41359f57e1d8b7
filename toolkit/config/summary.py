"""``pctk config show``: queues, nodes, accelerators, EFA, storage and price from the catalog."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from toolkit import catalog
from toolkit.config.model import ClusterTopology, parse_cluster


@dataclass(frozen=True)
class ResourceSummary:
    queue: str
    compute_resource: str
    instance_type: str
    capacity_type: str
    min_count: int
    max_count: int
    accelerator: str | None
    accelerators_per_node: int
    efa: bool
    price_usd_per_hour: float | None  # per instance, catalog's on-demand price


@dataclass(frozen=True)
class ClusterSummary:
    region: str | None
    resources: list[ResourceSummary]
    storage: list[str]
    accounting: bool

    def _total(self, attr: str) -> int:
        return sum(getattr(r, attr) for r in self.resources)

    @property
    def nodes_min(self) -> int:
        return self._total("min_count")

    @property
    def nodes_max(self) -> int:
        return self._total("max_count")

    @property
    def accelerators_min(self) -> int:
        return sum(r.min_count * r.accelerators_per_node for r in self.resources)

    @property
    def accelerators_max(self) -> int:
        return sum(r.max_count * r.accelerators_per_node for r in self.resources)

    def price(self, at: str) -> float | None:
        """Compute-node $/h at MinCount or MaxCount; None if any used type has no price."""
        total = 0.0
        for r in self.resources:
            count = r.min_count if at == "min" else r.max_count
            if count == 0:
                continue
            if r.price_usd_per_hour is None:
                return None
            total += count * r.price_usd_per_hour
        return round(total, 4)

    def to_json(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "resources": [asdict(r) for r in self.resources],
            "storage": self.storage,
            "accounting": self.accounting,
            "nodes": {"min": self.nodes_min, "max": self.nodes_max},
            "accelerators": {"min": self.accelerators_min, "max": self.accelerators_max},
            "price_usd_per_hour": {"min": self.price("min"), "max": self.price("max"),
                                   "basis": "on-demand, compute nodes only, pctk catalog"},
        }


def summarize(data: Any) -> ClusterSummary:
    """The summary of raw config data (read tolerantly) or of the parsed model."""
    config = data if isinstance(data, ClusterTopology) else parse_cluster(data, tolerant=True)
    resources = []
    for q, cr in config.compute_resources():
        itype = cr.instance_type or "?"
        inst = catalog.find(itype)
        acc = inst.accelerator if inst else None
        resources.append(ResourceSummary(
            queue=q.name, compute_resource=cr.name, instance_type=itype,
            capacity_type=q.capacity_type, min_count=cr.min_count,
            max_count=cr.max_count, accelerator=acc.model if acc else None,
            accelerators_per_node=acc.count if acc else 0, efa=cr.efa,
            price_usd_per_hour=inst.price_usd_per_hour if inst else None,
        ))
    storage = [f"{s.mount_dir or '?'} ({s.storage_type or '?'})" for s in config.shared_storage]
    return ClusterSummary(config.region, resources, storage, config.any_accounting)
