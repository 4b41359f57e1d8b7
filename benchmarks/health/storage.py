"""Shared mounts: present, writable (create + fsync + remove a file), with free space.

The probe runs in a thread with a time limit: a hung NFS/Lustre mount blocks in the kernel
and would otherwise hang the whole check.
"""

from __future__ import annotations

import os
import tempfile
import threading
from typing import Any

from benchmarks.health.context import NodeContext
from benchmarks.health.status import CheckResult, fail, ok, skip, warn


def probe_write(path: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".pctk-health-", dir=path)
    try:
        os.write(fd, b"pctk health probe\n")
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(tmp)


def probe_mount(path: str, timeout: float) -> dict[str, Any]:
    """Facts about one mount; ``error`` set when it is unusable."""
    facts: dict[str, Any] = {"path": path, "error": None}

    def work() -> None:
        if not os.path.exists(path):
            facts["error"] = "missing"
            return
        if not os.path.isdir(path):
            facts["error"] = "not a folder"
            return
        facts["mountpoint"] = os.path.ismount(path)
        st = os.statvfs(path)
        facts["free_gib"] = round(st.f_bavail * st.f_frsize / 2**30, 2)
        try:
            probe_write(path)
        except OSError as exc:
            facts["error"] = f"not writable: {exc.strerror}"

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        facts["error"] = f"no answer within {timeout:g}s (hung mount?)"
    return facts


def check_storage(ctx: NodeContext) -> CheckResult:
    """Shared mounts present, writable (create + fsync + remove), with free space."""
    if not ctx.mounts:
        return skip("no shared mounts configured")
    t = ctx.thresholds
    paths = [m.replace("%n", ctx.node) for m in ctx.mounts]
    facts = [probe_mount(p, t["storage_probe_timeout_s"]) for p in paths]
    expected = {"writable": True, "min_free_gib": t["storage_min_free_gib"]}
    for f in facts:
        if f["error"]:
            return fail(f"{f['path']} {f['error']}", "check the mount (mount | grep "
                        f"{f['path']}; dmesg); remount or replace the instance", facts, expected)
        if t["storage_require_mountpoint"] and not f["mountpoint"]:
            return fail(f"{f['path']} is not a mount point", "the shared file system did not "
                        "mount: check /etc/fstab and the FSx/EFS security group", facts, expected)
    low = [f for f in facts if f["free_gib"] < t["storage_min_free_gib"]]
    if low:
        return warn(f"{low[0]['path']} has {low[0]['free_gib']} GiB free", "free space on the "
                    "shared file system", facts, expected)
    return ok(f"{len(facts)} mounts writable", facts, expected)
