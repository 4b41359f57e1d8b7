"""What the cluster config says the shared file system should deliver, and the verdict.

FSx for Lustre throughput is provisioned per TiB of storage (AWS, "Performance
characteristics of SSD and HDD storage classes", FSx for Lustre User Guide,
https://docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html, and the
PerUnitStorageThroughput field of the FSx API, CreateFileSystemLustreConfiguration):

    throughput MB/s = StorageCapacity (GiB) / 1024 x PerUnitStorageThroughput (MB/s/TiB)

- PERSISTENT_1 SSD: 50, 100 or 200 MB/s/TiB; PERSISTENT_1 HDD: 12 or 40 MB/s/TiB.
- PERSISTENT_2 SSD: 125, 250, 500 or 1000 MB/s/TiB.
- SCRATCH_2: 200 MB/s/TiB baseline (bursts up to 1300 on network credits; the verdict
  uses the baseline, which is what a long run can count on). SCRATCH_1: 200 MB/s/TiB.

Each client's ceiling is its instance's network bandwidth (the catalog's network_gbps,
sourced there) x nodes; the expectation is the lower of the two. Mounts of other types
(EBS, EFS, an existing file system given by id) get no expectation: the config does not
say what they provide.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from benchmarks.bands import STORAGE
from toolkit.config.model import ClusterTopology, Storage, parse_cluster

PER_UNIT = {  # MB/s per TiB that each deployment type accepts (sources above)
    ("PERSISTENT_1", "SSD"): (50, 100, 200),
    ("PERSISTENT_1", "HDD"): (12, 40),
    ("PERSISTENT_2", "SSD"): (125, 250, 500, 1000),
}
SCRATCH_BASELINE = {"SCRATCH_1": 200, "SCRATCH_2": 200}
PASS_AT, FAIL_BELOW = STORAGE.warn_below, STORAGE.fail_below  # benchmarks/bands.py
MB_PER_GBIT = 1000 / 8  # 1 Gbit/s = 125 MB/s (10^6 bytes)


@dataclass(frozen=True)
class Provisioned:
    mount_dir: str
    mb_per_s: float
    formula: str


def _storage(config: Any) -> tuple[Storage, ...]:
    """SharedStorage of the model, or of raw config data (read tolerantly)."""
    if not isinstance(config, ClusterTopology):
        config = parse_cluster(config, tolerant=True)
    return config.shared_storage


def mount_for(config: Any, target: str) -> dict[str, Any] | None:
    """The SharedStorage entry whose MountDir holds ``target`` (the deepest one)."""
    best: tuple[int, dict[str, Any]] | None = None
    path = PurePosixPath(target)
    for entry in _storage(config):
        if entry.mount_dir is None:
            continue
        mp = PurePosixPath(entry.mount_dir)
        if (path == mp or mp in path.parents) and (best is None or len(mp.parts) > best[0]):
            best = (len(mp.parts), entry.raw)
    return best[1] if best else None


def first_mount_dir(config: Any) -> str | None:
    return next((s.mount_dir for s in _storage(config) if s.mount_dir is not None), None)


def provisioned(entry: dict[str, Any]) -> Provisioned | None:
    """FSx for Lustre's provisioned throughput from its settings; None if not stated."""
    if entry.get("StorageType") != "FsxLustre":
        return None
    s = entry.get("FsxLustreSettings") or {}
    capacity, kind = s.get("StorageCapacity"), s.get("DeploymentType", "SCRATCH_2")
    if (not isinstance(capacity, int) or isinstance(capacity, bool) or capacity <= 0
            or s.get("FileSystemId")):
        return None
    tib = capacity / 1024
    per_unit: int
    if kind in SCRATCH_BASELINE:
        per_unit, how = SCRATCH_BASELINE[kind], f"{kind} baseline"
    else:
        stated, storage = s.get("PerUnitStorageThroughput"), s.get("StorageType", "SSD")
        if isinstance(stated, bool) or stated not in PER_UNIT.get((kind, storage), ()):
            return None
        per_unit, how = int(stated), f"{kind} {storage}"
    return Provisioned(str(entry.get("MountDir")), tib * per_unit,
                       f"{capacity} GiB = {tib:.2f} TiB x {per_unit} MB/s/TiB ({how})")


def client_ceiling(network_gbps: float, nodes: int) -> float:
    return network_gbps * MB_PER_GBIT * nodes


def status_for(ratio: float) -> str:
    if ratio >= PASS_AT:
        return "PASS"
    return "WARN" if ratio >= FAIL_BELOW else "FAIL"


def judge(measured: dict[str, float], prov: Provisioned | None,
          ceiling_mb_s: float | None) -> tuple[str, list[str], float | None]:
    """Verdict for measured aggregate MB/s per phase: (status, reasons, expected MB/s)."""
    if prov is None:
        return "UNKNOWN", ["no provisioned throughput in the config for this mount; "
                           "figures only"], None
    limits = [f"provisioned {prov.mb_per_s:,.0f} MB/s ({prov.formula})"]
    expected = prov.mb_per_s
    if ceiling_mb_s:
        limits.append(f"client network ceiling {ceiling_mb_s:,.0f} MB/s")
        expected = min(expected, ceiling_mb_s)
    which = "the lower of " if len(limits) > 1 else ""
    order = ("PASS", "WARN", "FAIL")
    worst, reasons = "PASS", [f"expected {expected:,.0f} MB/s: {which}{' and '.join(limits)}"]
    for phase, mb_s in measured.items():
        ratio = mb_s / expected
        status = status_for(ratio)
        worst = max(worst, status, key=order.index)
        reasons.append(f"{phase} {mb_s:,.0f} MB/s = {ratio:.0%} of expected: {status}")
    return worst, reasons, expected
