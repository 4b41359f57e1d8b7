"""The instance catalog: hardware facts, prices and NCCL expectations, each with its source.

The facts live in ``toolkit/data/instances.yaml`` (data, not code); this module reads them
once and hands out frozen dataclasses. Units: host memory in GiB, accelerator memory in MiB
as AWS publishes it per instance type (describe-instance-types ``SizeInMiB``), network in
Gbps, peaks in dense bf16 TFLOP/s per accelerator, busbw in GB/s.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from toolkit.errors import PctkError

DATA_FILE = Path(__file__).resolve().parent / "data" / "instances.yaml"


@dataclass(frozen=True)
class Accelerator:
    kind: str  # "gpu" | "neuron"
    vendor: str  # "nvidia" | "aws"
    model: str  # "H100", "A100-40GB", ...
    count: int
    memory_mib: int  # per accelerator, as AWS publishes it (A10G 22,888; H100 81,920)
    gres_type: str  # Slurm GRES type, lowercase
    peak_bf16_tflops: float  # dense, per accelerator
    peak_fp8_tflops: float | None = None  # dense; None without FP8 tensor cores

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024

    @property
    def total_memory_gib(self) -> float:
        return self.memory_gib * self.count


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: float
    accelerator: Accelerator | None
    efa_supported: bool
    efa_interfaces: int
    network_gbps: float
    interconnect: str | None
    price_usd_per_hour: float | None
    price_region: str | None
    price_date: str | None
    sources: dict[str, list[str]] = field(hash=False, compare=False)
    unconfirmed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        """Number of NVIDIA GPUs (0 for CPU and Neuron instances)."""
        acc = self.accelerator
        return acc.count if acc is not None and acc.kind == "gpu" else 0


@dataclass(frozen=True)
class Expectation:
    """A published busbw figure (GB/s) for one instance type, node count and message size.

    ``algo`` is the NCCL algorithm it was measured with (None: the source does not say);
    ``basis`` says why :func:`busbw_expectation` chose this figure when that is not obvious.
    """

    instance_type: str
    nodes: int
    collective: str
    gbps: float
    size_bytes: int | None
    source: str
    note: str = ""
    algo: str | None = None
    basis: str = ""


@dataclass(frozen=True)
class _Catalog:
    instances: dict[str, InstanceType]
    sources: dict[str, str]
    expectations: tuple[Expectation, ...]


def _accelerator(
    spec: dict[str, Any], models: dict[str, Any]
) -> tuple[Accelerator, dict[str, list[str]], list[str], list[str]]:
    """The accelerator of one instance, its sources, unconfirmed fields and notes."""
    model = models[spec["model"]]
    acc = Accelerator(
        kind=model["kind"],
        vendor=model["vendor"],
        model=spec["model"],
        count=int(spec["count"]),
        memory_mib=int(model["memory_mib"]),
        gres_type=model["gres_type"],
        peak_bf16_tflops=float(model["peak_bf16_tflops"]),
        peak_fp8_tflops=(float(model["peak_fp8_tflops"]) if "peak_fp8_tflops" in model
                         else None),
    )
    srcs = {f"accelerator.{k}": list(v) for k, v in model.get("sources", {}).items()}
    unconfirmed = [f"accelerator.{k}" for k in model.get("unconfirmed", [])]
    notes = [f"{spec['model']}: {model['note']}"] if model.get("note") else []
    return acc, srcs, unconfirmed, notes


def _build(raw: dict[str, Any]) -> _Catalog:
    models = raw["accelerators"]
    price = raw["price_defaults"]
    instances: dict[str, InstanceType] = {}
    for name, spec in raw["instances"].items():
        sources = {k: list(v) for k, v in spec.get("sources", {}).items()}
        unconfirmed = list(spec.get("unconfirmed", []))
        notes = [spec["note"]] if spec.get("note") else []
        acc = None
        if spec.get("accelerator"):
            acc, acc_srcs, acc_unconfirmed, acc_notes = _accelerator(spec["accelerator"], models)
            sources.update(acc_srcs)
            unconfirmed += acc_unconfirmed
            notes += acc_notes
        has_price = spec.get("price_usd_per_hour") is not None
        instances[name] = InstanceType(
            name=name,
            vcpus=int(spec["vcpus"]),
            memory_gib=float(spec["memory_gib"]),
            accelerator=acc,
            efa_supported=bool(spec["efa_supported"]),
            efa_interfaces=int(spec["efa_interfaces"]),
            network_gbps=float(spec["network_gbps"]),
            interconnect=spec.get("interconnect"),
            price_usd_per_hour=float(spec["price_usd_per_hour"]) if has_price else None,
            price_region=price["region"] if has_price else None,
            price_date=str(price["date"]) if has_price else None,
            sources=sources,
            unconfirmed=tuple(unconfirmed),
            notes=tuple(notes),
        )
    expectations = tuple(Expectation(**e) for e in raw.get("nccl_expectations", []))
    return _Catalog(instances, dict(raw["sources"]), expectations)


@cache
def _catalog() -> _Catalog:
    with DATA_FILE.open(encoding="utf-8") as fh:
        return _build(yaml.safe_load(fh))


def find(name: str) -> InstanceType | None:
    """The catalog entry for ``name`` (e.g. ``p5.48xlarge``), or None if unknown."""
    return _catalog().instances.get(name.strip().lower()) if isinstance(name, str) else None


def get(name: str) -> InstanceType:
    """The catalog entry for ``name``; raises PctkError with close matches if unknown."""
    inst = find(name)
    if inst is not None:
        return inst
    known = sorted(_catalog().instances)
    close = difflib.get_close_matches(str(name).strip().lower(), known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}?" if close else f"known types: {', '.join(known)}"
    raise PctkError(f"instance type {name!r} is not in the pctk catalog", hint)


def all_instances() -> list[InstanceType]:
    return sorted(_catalog().instances.values(), key=lambda i: i.name)


def sources() -> dict[str, str]:
    """Source key (``S1``) -> citation with URL."""
    return dict(_catalog().sources)


def expectations(instance_type: str | None = None) -> list[Expectation]:
    """Every published busbw figure, optionally for one instance type."""
    return [e for e in _catalog().expectations
            if instance_type is None or e.instance_type == instance_type]


def _same_algo(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a.lower() == b.lower()


def busbw_expectation(
    instance_type: str,
    collective: str = "all_reduce",
    nodes: int = 1,
    algo: str | None = None,
    *,
    size_bytes: int | None = None,
) -> Expectation | None:
    """The published busbw to judge a run against, or None if none applies.

    ``algo`` is the NCCL algorithm the run used (``NVLS``, ``Ring``, ...; any case). Figures
    measured with another algorithm never apply; figures whose source names no algorithm
    apply to any run. With ``algo=None`` (unknown) the most lenient applicable figure is
    returned and its ``basis`` says so, so an unknown algorithm never fails a healthy Ring
    run against an NVLS figure.

    Several message sizes may be published; without ``size_bytes`` the largest is used
    (busbw keeps rising with size), with it the largest published size not above it, so a
    run is never judged against a bigger message than it sent.
    """
    rows = [e for e in _catalog().expectations
            if e.instance_type == instance_type and e.nodes == nodes and e.collective == collective]
    if algo is not None:
        rows = [e for e in rows if e.algo is None or _same_algo(e.algo, algo)]
    if size_bytes is not None:
        rows = [e for e in rows if e.size_bytes is None or e.size_bytes <= size_bytes]
    if not rows:
        return None
    top = max(e.size_bytes or 0 for e in rows)
    rows = [e for e in rows if (e.size_bytes or 0) == top]
    if algo is not None:
        exact = [e for e in rows if _same_algo(e.algo, algo)]
        return min(exact or rows, key=lambda e: e.gbps)
    best = min(rows, key=lambda e: e.gbps)
    algos = sorted({e.algo for e in rows if e.algo})
    if len(algos) > 1 or (algos and best.algo is not None):
        figures = ", ".join(f"{e.algo or 'unstated'} {e.gbps:g}" for e in rows)
        return replace(best, basis=f"algorithm unknown: the most lenient of {figures} GB/s")
    return best


def expected_busbw(
    instance_type: str,
    nodes: int,
    collective: str = "all_reduce",
    *,
    size_bytes: int | None = None,
    algo: str | None = None,
) -> Expectation | None:
    """:func:`busbw_expectation` with the older argument order."""
    return busbw_expectation(instance_type, collective, nodes, algo, size_bytes=size_bytes)
