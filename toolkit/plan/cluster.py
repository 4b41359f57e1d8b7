"""What a plan takes from a cluster config: the GPU queue's instance type and node limit, and
the FSx for Lustre throughput checkpoints are written at.

The config is read through the one config model (:mod:`toolkit.config.model`), GPU counts
come from the catalog, and FSx for Lustre throughput from the one formula pctk has for it,
:func:`toolkit.bench.storage.expect.provisioned` (capacity / 1024 x PerUnitStorageThroughput).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit import catalog
from toolkit.bench.storage.expect import Provisioned, provisioned
from toolkit.config.model import ClusterTopology, ComputeResource, Queue
from toolkit.config.spec import FsxLustreSpec
from toolkit.plan.model import PlanError


@dataclass(frozen=True)
class ClusterFacts:
    source: str  # the config file
    queue: str
    compute_resource: str
    instance_type: str
    max_nodes: int  # MaxCount of the queue's compute resources of that instance type
    max_nodes_how: str  # "MaxCount 4 of compute resource p5"
    fsx: Provisioned | None
    fsx_capacity_gib: int | None
    notes: tuple[str, ...] = ()
    region: str | None = None  # the config's Region


def _gpu_type(name: str) -> catalog.InstanceType | None:
    inst = catalog.find(name) if name else None
    return inst if inst is not None and inst.gpus else None


def _gpu_resources(q: Queue) -> list[ComputeResource]:
    return [cr for cr in q.compute_resources if _gpu_type(cr.instance_type)]


def gpu_queue(topo: ClusterTopology, name: str | None) -> Queue:
    """``name``, or the first queue with a GPU compute resource."""
    if name is not None:
        q = topo.queue(name)
        if not _gpu_resources(q):
            types = ", ".join(cr.instance_type for cr in q.compute_resources) or "none"
            raise PlanError(f"queue {q.name} in {topo.source} has no GPU compute resource "
                            f"({types})", "name a GPU queue with --queue")
        return q
    for q in topo.queues:
        if _gpu_resources(q):
            return q
    raise PlanError(f"{topo.source} has no queue of NVIDIA GPU instances (the catalog's)",
                    "pctk plan plans GPU training: give a config with a GPU queue")


def facts(topo: ClusterTopology, queue: str | None) -> ClusterFacts:
    q = gpu_queue(topo, queue)
    resources = _gpu_resources(q)
    first = resources[0]
    same = [cr for cr in resources if cr.instance_type == first.instance_type]
    notes: list[str] = []
    others = sorted({cr.instance_type for cr in resources} - {first.instance_type})
    if others:
        notes.append(f"queue {q.name} also has {', '.join(others)}: the plan is for its first "
                     f"GPU compute resource, {first.name} ({first.instance_type})")
    if len(first.instance_types) > 1:
        notes.append(f"compute resource {first.name} lists several instance types; the plan is "
                     f"for the first, {first.instance_type}")
    max_nodes = sum(cr.max_count for cr in same)
    how = (" + ".join(str(cr.max_count) for cr in same) + " of compute resources "
           + ", ".join(cr.name for cr in same)) if len(same) > 1 else \
        f"{first.max_count} of compute resource {first.name}"
    fsx, gib = _fsx(topo, notes)
    return ClusterFacts(topo.source, q.name, first.name, first.instance_type, max_nodes,
                        f"MaxCount {how}", fsx, gib, tuple(notes), topo.region)


def _fsx(topo: ClusterTopology, notes: list[str]) -> tuple[Provisioned | None, int | None]:
    lustre = [s for s in topo.shared_storage if s.storage_type == "FsxLustre"]
    for s in lustre:
        prov = provisioned(s.raw)
        if prov is not None:
            return prov, int(s.raw["FsxLustreSettings"]["StorageCapacity"])
    if lustre:
        notes.append(f"the FSx for Lustre at {lustre[0].mount_dir} in {topo.source} states no "
                     "throughput pctk can read (an existing FileSystemId, or an unknown "
                     "PerUnitStorageThroughput): the checkpoint rate is the default; measure it "
                     "with `pctk bench storage` and pass --from-record")
    else:
        notes.append(f"{topo.source} has no FSx for Lustre: the checkpoint rate is the default "
                     "for one; measure yours with `pctk bench storage` and pass --from-record")
    return None, None


def default_fsx(capacity_gib: int) -> Provisioned:
    """The FSx for Lustre ``pctk config new`` and ``plan --emit-config`` write, at this size."""
    spec = FsxLustreSpec(capacity_gib=capacity_gib)
    prov = provisioned({"StorageType": "FsxLustre", "MountDir": spec.mount_dir,
                        "FsxLustreSettings": {
                            "StorageCapacity": capacity_gib,
                            "DeploymentType": spec.deployment_type,
                            "PerUnitStorageThroughput": spec.throughput_mb_s_per_tib}})
    assert prov is not None, spec
    return prov
