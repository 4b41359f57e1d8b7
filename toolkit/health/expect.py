"""Expectations for the node side, from the instance catalog (data handed over as JSON)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolkit import catalog

EXPECT_SCHEMA = "pctk.health-expect/v1"


def instance_expectations(name: str) -> dict[str, Any]:
    inst = catalog.get(name)
    acc = inst.accelerator
    gpu = acc is not None and acc.kind == "gpu"
    # the node check does not control NCCL's algorithm: judge by the most lenient figure
    busbw = catalog.busbw_expectation(name, "all_reduce", 1, algo=None)
    return {
        "gpu_count": inst.gpus,
        "gpu_model": acc.model if gpu and acc else None,
        "gpu_memory_mib": acc.memory_mib if gpu and acc else None,
        "efa_interfaces": inst.efa_interfaces if inst.efa_supported else 0,
        "nccl_all_reduce_busbw_gbps": busbw.gbps if busbw else None,
        "nccl_source": busbw.source if busbw else None,
        "nccl_algo": busbw.algo if busbw else None,
    }


def build_expectations(
    instance_types: Iterable[str] | None = None,
    *,
    nodes: dict[str, str] | None = None,
    mounts: list[str] | None = None,
    thresholds: dict[str, Any] | None = None,
    tool_path: list[str] | None = None,
) -> dict[str, Any]:
    """The expectations file; every catalog type when ``instance_types`` is None."""
    names = sorted(set(instance_types)) if instance_types is not None else \
        [i.name for i in catalog.all_instances()]
    types = {n: instance_expectations(n) for n in names}
    spec: dict[str, Any] = {"schema": EXPECT_SCHEMA, "instance_types": types}
    if nodes:
        spec["nodes"] = dict(sorted(nodes.items()))
    if mounts is not None:
        spec["mounts"] = list(mounts)
    if thresholds:
        spec["thresholds"] = dict(thresholds)
    if tool_path:
        spec["tool_path"] = list(tool_path)
    return spec
