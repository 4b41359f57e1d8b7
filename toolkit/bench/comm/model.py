"""What one nccl-tests table (or one torch sweep block) holds, as plain dataclasses."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.nccltable import Measurement, Row

__all__ = ["CollectiveRun", "Device", "Inconsistency", "Measurement", "Network", "Row"]


@dataclass
class Device:
    rank: int
    host: str
    device: int | None
    bus: str | None
    name: str
    group: int | None = None
    pid: int | None = None


@dataclass
class Network:
    """Which network NCCL used, from its INFO lines: efa, socket, ib, ofi-<prov>, mixed, unknown."""

    transport: str = "unknown"
    evidence: list[str] = field(default_factory=list)


@dataclass
class Inconsistency:
    """A printed figure that does not follow from the others beyond rounding."""

    size_bytes: int
    placement: str
    check: str        # "busbw=algbw*factor" or "algbw=size/time"
    reported: float
    expected: float


@dataclass
class CollectiveRun:
    """One table: a collective over a size sweep, with what the log says about the run."""

    collective: str | None
    collective_source: str | None = None
    dtype: str | None = None
    redop: str | None = None
    nranks: int | None = None
    nranks_source: str | None = None
    devices: list[Device] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    format: str | None = None          # new | old | oldest | json | torch
    complete: bool = False             # the footer ('Avg bus bandwidth') was reached
    failure_lines: list[str] = field(default_factory=list)
    warn_lines: list[str] = field(default_factory=list)
    out_of_bounds: dict[str, Any] | None = None   # {"count": int, "status": "OK"|"FAILED"}
    avg_busbw_gbps: float | None = None
    network: Network = field(default_factory=Network)
    nccl_version: str | None = None
    inconsistencies: list[Inconsistency] = field(default_factory=list)
    source: str | None = None
    notes: list[str] = field(default_factory=list)
    unsupported: str | None = None
    implementation: str | None = None
    # which NCCL algorithm ran (Ring, Tree, NVLS, NVLSTree, CollnetDirect, ...) and why we
    # think so; None when the log does not say
    algorithm: str | None = None
    algorithm_source: str | None = None
    # ranks each ncclCommInitRank INFO line reported (distinct values, in order seen)
    info_nranks: list[int] = field(default_factory=list)
    # >1 when the text holds several independent processes' outputs interleaved (rank 0
    # printed by each, several footers): nccl-tests without MPI launched as N processes
    separate_processes: int = 1
    repeated_sizes: int = 0            # rows whose size appeared before in this table
    nccl_tests_version: str | None = None
    cuda_version: str | None = None    # from the NCCL version banner ('2.9.9+cuda11.2')
    cuda_driver: str | None = None     # 'NCCL INFO cudaDriverVersion 12080' -> '12.8'

    @property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(d.host for d in self.devices))

    def largest(self) -> Row | None:
        return max(self.rows, key=lambda r: r.size_bytes) if self.rows else None

    def to_block(self) -> dict[str, Any]:
        """The metrics block (layout in :mod:`toolkit.bench.comm`)."""
        block: dict[str, Any] = {
            "collective": self.collective, "collective_source": self.collective_source,
            "dtype": self.dtype, "redop": self.redop, "nranks": self.nranks,
            "nranks_source": self.nranks_source,
            "devices": [asdict(d) for d in self.devices], "hosts": self.hosts,
            "format": self.format, "rows": [r.to_dict() for r in self.rows],
            "complete": self.complete, "failure_lines": self.failure_lines,
            "warn_lines": self.warn_lines, "out_of_bounds": self.out_of_bounds,
            "avg_busbw_gbps": self.avg_busbw_gbps, "network": asdict(self.network),
            "nccl_version": self.nccl_version,
            "inconsistencies": [asdict(i) for i in self.inconsistencies],
            "source": self.source, "notes": self.notes,
            "algorithm": self.algorithm, "algorithm_source": self.algorithm_source,
            "info_nranks": self.info_nranks, "separate_processes": self.separate_processes,
            "repeated_sizes": self.repeated_sizes,
            "nccl_tests_version": self.nccl_tests_version, "cuda_version": self.cuda_version,
            "cuda_driver": self.cuda_driver,
        }
        if self.unsupported:
            block["unsupported"] = self.unsupported
        if self.implementation:
            block["implementation"] = self.implementation
        return block

    @classmethod
    def from_block(cls, b: dict[str, Any]) -> CollectiveRun:
        devices = []
        for d in b.get("devices") or []:
            devices.append(Device(int(d.get("rank", 0)), str(d.get("host") or "?"),
                                  d.get("device"), d.get("bus"), str(d.get("name") or ""),
                                  d.get("group"), d.get("pid")))
        net = b.get("network") or {}
        return cls(
            collective=b.get("collective"), collective_source=b.get("collective_source"),
            dtype=b.get("dtype"), redop=b.get("redop"), nranks=b.get("nranks"),
            nranks_source=b.get("nranks_source"), devices=devices,
            rows=[Row.from_dict(r) for r in b.get("rows") or []], format=b.get("format"),
            complete=bool(b.get("complete")), failure_lines=list(b.get("failure_lines") or []),
            warn_lines=list(b.get("warn_lines") or []), out_of_bounds=b.get("out_of_bounds"),
            avg_busbw_gbps=b.get("avg_busbw_gbps"),
            network=Network(net.get("transport", "unknown"), list(net.get("evidence") or [])),
            nccl_version=b.get("nccl_version"),
            inconsistencies=[Inconsistency(**i) for i in b.get("inconsistencies") or []],
            source=b.get("source"), notes=list(b.get("notes") or []),
            unsupported=b.get("unsupported"), implementation=b.get("implementation"),
            algorithm=b.get("algorithm"), algorithm_source=b.get("algorithm_source"),
            info_nranks=[int(n) for n in b.get("info_nranks") or []],
            separate_processes=int(b.get("separate_processes") or 1),
            repeated_sizes=int(b.get("repeated_sizes") or 0),
            nccl_tests_version=b.get("nccl_tests_version"), cuda_version=b.get("cuda_version"),
            cuda_driver=b.get("cuda_driver"),
        )
