"""The FSx for Lustre throughput checkpoints are written at, from the one formula pctk has
for it, :func:`toolkit.bench.storage.expect.provisioned` (capacity / 1024 x
PerUnitStorageThroughput).
"""

from __future__ import annotations

from toolkit.bench.storage.expect import Provisioned, provisioned
from toolkit.config.spec import FsxLustreSpec


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
