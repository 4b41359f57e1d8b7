"""GPU device files (no NVML needed): what gres.conf lists must exist as character devices."""

from __future__ import annotations

import glob
import os
import re
import stat

from benchmarks.health.context import NodeContext
from benchmarks.health.gres import gres_conf_path, node_gpu_files
from benchmarks.health.status import CheckResult, fail, ok, skip

_DEV = re.compile(r"/dev/nvidia\d+$")


def _is_char_device(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def check_gpu_devices(ctx: NodeContext) -> CheckResult:
    """GRES device files (gres.conf File=) are character devices, as many as the catalog says."""
    expected = ctx.expect.get("gpu_count")
    conf = gres_conf_path(ctx.slurm_conf)
    listed = node_gpu_files(conf, ctx.node)
    files, source = listed or [], str(conf)
    if not files:
        # no File= lines (AutoDetect or no gres.conf): look at the driver's device nodes
        files = sorted((p for p in glob.glob("/dev/nvidia*") if _DEV.search(p)),
                       key=lambda p: int(re.sub(r"\D", "", p)))
        source = "/dev/nvidia[0-9]*"
    if not files and not expected:
        return skip("no GPUs expected on this node and none configured")
    present = [f for f in files if _is_char_device(f)]
    missing = [f for f in files if f not in present]
    value = {"present": len(present), "listed": len(files), "source": source}
    if missing:
        more = f" +{len(missing) - 3} more" if len(missing) > 3 else ""
        shown = ", ".join(os.path.basename(m) for m in missing[:3]) + more
        shown += f" in {os.path.dirname(missing[0])}"
        return fail(f"{len(missing)} of {len(files)} GPU device files missing: {shown}",
                    "check the NVIDIA driver (nvidia-smi, dmesg for Xid/'fallen off the bus'); "
                    "reboot or replace the instance", value, expected)
    if expected is not None and len(present) != expected:
        return fail(f"{len(present)} GPU devices, {ctx.instance_type} has {expected}",
                    "a GPU is missing: reboot; if it persists, replace the instance",
                    value, expected)
    if expected is None:
        return ok(f"{len(present)} GPU device files present (instance type unknown)", value)
    return ok(f"{len(present)} GPU device files", value, expected)
