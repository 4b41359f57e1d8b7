"""The instance catalog: hardware facts, prices and NCCL expectations, each with its source.

The facts live in ``toolkit/data/instances.yaml`` (data, not code), the accelerators' in
``benchmarks/accelerators.yaml`` (:mod:`benchmarks.hardware`, the one table a compute node
reads too); this module reads them once and hands out frozen dataclasses. Units: host memory
in GiB, accelerator memory in MiB as AWS publishes it per instance type (describe-instance-types
``SizeInMiB``), network in Gbps, peaks in dense bf16 TFLOP/s per accelerator, busbw in GB/s.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from benchmarks import hardware
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
    mem_bw_tbps: float | None = None  # memory bandwidth, TB/s (10^12 bytes/s); None: not stated

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
    family: str = ""
    arch: str | None = None  # "x86_64" | "arm64" where the catalog says

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


_SHOWN_FIGURES = ("memory_mib", "peak_bf16_tflops", "peak_fp8_tflops", "mem_bw_tbps")


def _model_accelerator(name: str, count: int, memory_mib: int | None = None) -> Accelerator:
    """``count`` accelerators of the table's model ``name`` (``memory_mib``: as the EC2 API
    gave it, else the table's)."""
    model = hardware.models()[name]
    if model.memory_mib is None or model.gres_type is None:
        raise ValueError(f"{hardware.TABLE}: {name} needs memory_mib and gres_type to be on "
                         "an instance type")
    return Accelerator(
        kind=model.kind, vendor=model.vendor, model=name, count=count,
        memory_mib=memory_mib if memory_mib is not None else model.memory_mib,
        gres_type=model.gres_type, peak_bf16_tflops=model.peak_bf16_tflops,
        peak_fp8_tflops=model.peak_fp8_tflops, mem_bw_tbps=model.mem_bw_tbps)


def _accelerator(
    spec: dict[str, Any]
) -> tuple[Accelerator, dict[str, list[str]], list[str], list[str]]:
    """The accelerator of one instance, its sources, unconfirmed fields and notes."""
    model = hardware.models()[spec["model"]]
    acc = _model_accelerator(spec["model"], int(spec["count"]))
    # the sources of the figures an instance type shows (the fp32 peak is the benchmarks')
    srcs = {f"accelerator.{k}": list(v) for k, v in model.sources.items()
            if k in _SHOWN_FIGURES}
    unconfirmed = [f"accelerator.{k}" for k in model.unconfirmed]
    notes = [f"{spec['model']}: {model.note}"] if model.note else []
    return acc, srcs, unconfirmed, notes


# how an EC2 instance type name is built: family (letters, generation digit, attributes, an
# optional "-suffix" such as p6-b200 or u7i-12tb), a dot, a size
_FAMILY = r"[a-z]+[0-9][a-z0-9]*(?:-[a-z0-9]+)*"
_SIZE = r"(?:nano|micro|small|medium|large|xlarge|[0-9]+xlarge|metal(?:-[0-9]+xl)?)"
_TYPE_NAME = re.compile(rf"{_FAMILY}\.{_SIZE}")


def well_formed(name: str) -> bool:
    """Whether ``name`` is spelled like an EC2 instance type (``c8i.4xlarge``: yes,
    ``p5.48xlarg``: no). A well-formed type the catalog lacks is unknown, not wrong."""
    return isinstance(name, str) and _TYPE_NAME.fullmatch(name.strip().lower()) is not None


def _rule_vcpus(size: str, largest: int) -> int:
    """vCPUs of a size in a regular family: medium 1, large 2, xlarge 4, Nxlarge and
    metal-Nxl 4 x N, metal the family's largest size."""
    fixed = {"medium": 1, "large": 2, "xlarge": 4}
    if size in fixed:
        return fixed[size]
    m = re.fullmatch(r"([0-9]+)xlarge|metal-([0-9]+)xl", size)
    if m:
        return 4 * int(m.group(1) or m.group(2))
    if size == "metal":
        return largest
    raise ValueError(f"no vCPU rule for size {size!r}: list it under sizes")


def _family_instances(fam: str, spec: dict[str, Any], price: dict[str, Any]
                      ) -> dict[str, InstanceType]:
    """The instance types of one CPU family, expanded from its per-family rule (see the
    ``cpu_families`` comment in instances.yaml)."""
    over: dict[str, dict[str, Any]] = spec.get("sizes") or {}
    network: dict[str, float] = spec["network_gbps"]
    efa: dict[str, int] = spec.get("efa_interfaces") or {}
    ratio: Any = spec.get("memory_gib_per_vcpu")  # None: every size lists memory_gib
    per_vcpu = spec.get("price_usd_per_vcpu_hour")
    sized = [s for s in network if s != "metal"]
    largest = max((over.get(s, {}).get("vcpus") or _rule_vcpus(s, 0) for s in sized), default=0)
    out: dict[str, InstanceType] = {}
    for size, gbps in network.items():
        o = over.get(size, {})
        vcpus = int(o.get("vcpus") or _rule_vcpus(size, largest))
        memory = float(o["memory_gib"]) if "memory_gib" in o else float(ratio) * vcpus
        if "price_usd_per_hour" in o:
            usd: float | None = float(o["price_usd_per_hour"])
        elif per_vcpu is not None:
            usd = round(float(per_vcpu) * vcpus, 6)
        else:
            usd = None
        sources = {k: list(v) for k, v in spec["sources"].items()}
        if size not in efa:
            sources.pop("efa_supported", None)
            sources.pop("efa_interfaces", None)
        out[f"{fam}.{size}"] = InstanceType(
            name=f"{fam}.{size}",
            vcpus=vcpus,
            memory_gib=memory,
            accelerator=None,
            efa_supported=size in efa,
            efa_interfaces=int(efa.get(size, 0)),
            network_gbps=float(gbps),
            interconnect=None,
            price_usd_per_hour=usd,
            price_region=price["region"] if usd is not None else None,
            price_date=str(price["date"]) if usd is not None else None,
            sources=sources,
            unconfirmed=() if usd is not None else ("price_usd_per_hour",),
            notes=(spec["note"],) if spec.get("note") else (),
            family=fam,
            arch=spec.get("arch"),
        )
    return out


def _build(raw: dict[str, Any]) -> _Catalog:
    price = raw["price_defaults"]
    instances: dict[str, InstanceType] = {}
    for fam, fspec in (raw.get("cpu_families") or {}).items():
        instances.update(_family_instances(fam, fspec, price))
    for name, spec in raw["instances"].items():
        sources = {k: list(v) for k, v in spec.get("sources", {}).items()}
        unconfirmed = list(spec.get("unconfirmed", []))
        notes = [spec["note"]] if spec.get("note") else []
        acc = None
        if spec.get("accelerator"):
            acc, acc_srcs, acc_unconfirmed, acc_notes = _accelerator(spec["accelerator"])
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
            family=name.split(".", 1)[0],
            arch=spec.get("arch") or (raw.get("cpu_families") or {}).get(
                name.split(".", 1)[0], {}).get("arch"),
        )
    expectations = tuple(Expectation(**e) for e in raw.get("nccl_expectations", []))
    return _Catalog(instances, dict(raw["sources"]), expectations)


@cache
def _catalog() -> _Catalog:
    with DATA_FILE.open(encoding="utf-8") as fh:
        return _build(yaml.safe_load(fh))


REFRESHED_NAME = "instance-types.json"  # under <state root>/catalog/, by `pctk catalog refresh`


def refreshed_file() -> Path:
    """Where `pctk catalog refresh` keeps what it read from the EC2 API."""
    from toolkit.paths import state_home

    return state_home() / "catalog" / REFRESHED_NAME


@cache
def _refreshed(path: Path, mtime_ns: int) -> dict[str, InstanceType]:
    """The refreshed types of one file version (types only the EC2 API knew of)."""
    import json

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {name: refreshed_instance(name, spec, raw)
                for name, spec in raw.get("instance_types", {}).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # unreadable: as if never refreshed (`catalog refresh` rewrites it)


def refreshed_instance(name: str, spec: dict[str, Any], meta: dict[str, Any]) -> InstanceType:
    """One type as `catalog refresh` stored it: facts from DescribeInstanceTypes, no price."""
    where = f"EC2 DescribeInstanceTypes, {meta.get('region')}, read {meta.get('fetched')}"
    acc = None
    if spec.get("accelerator"):
        acc = _model_accelerator(spec["accelerator"]["model"],
                                 int(spec["accelerator"]["count"]),
                                 int(spec["accelerator"]["memory_mib"]))
    figures = ["vcpus", "memory_gib", "network_gbps", "efa_supported", "efa_interfaces"]
    return InstanceType(
        name=name, vcpus=int(spec["vcpus"]), memory_gib=float(spec["memory_gib"]),
        accelerator=acc, efa_supported=bool(spec["efa_supported"]),
        efa_interfaces=int(spec["efa_interfaces"]), network_gbps=float(spec["network_gbps"]),
        interconnect=None, price_usd_per_hour=None, price_region=None, price_date=None,
        sources={f: [where] for f in figures}, unconfirmed=("price_usd_per_hour",),
        notes=("read from the EC2 API by `pctk catalog refresh`; no price",),
        family=name.split(".", 1)[0], arch=spec.get("arch"))


def _refreshed_now() -> dict[str, InstanceType]:
    path = refreshed_file()
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return {}
    return _refreshed(path, mtime)


def find(name: str) -> InstanceType | None:
    """The catalog entry for ``name`` (e.g. ``p5.48xlarge``), or None if unknown.

    The bundled catalog first (curated, sourced, priced); then, for a type it lacks, what
    `pctk catalog refresh` read from the EC2 API into the state root."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower()
    return _catalog().instances.get(key) or _refreshed_now().get(key)


def get(name: str) -> InstanceType:
    """The catalog entry for ``name``; raises PctkError if unknown: "facts unknown" for a
    well-formed type, close matches for a misspelled one."""
    inst = find(name)
    if inst is not None:
        return inst
    if well_formed(name):
        raise PctkError(f"instance type {name!r}: facts unknown (not in the pctk catalog)",
                        f"families it knows: {', '.join(families())}")
    known = sorted(_catalog().instances)
    close = difflib.get_close_matches(str(name).strip().lower(), known, n=3, cutoff=0.6)
    hint = (f"did you mean {' or '.join(close)}?" if close
            else f"not an EC2 instance type name; families pctk knows: {', '.join(families())}")
    raise PctkError(f"instance type {name!r} is not in the pctk catalog", hint)


def families() -> list[str]:
    """The instance families the catalog holds (``c5``, ``p5``, ...)."""
    return sorted({i.family for i in _catalog().instances.values()})


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
