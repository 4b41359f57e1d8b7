"""Node basics: munge credentials, clock synchronisation, local disk space."""

from __future__ import annotations

import os
import re

from benchmarks.health.context import NodeContext
from benchmarks.health.status import CheckResult, fail, ok, skip, warn


def check_munge(ctx: NodeContext) -> CheckResult:
    """munge -n | unmunge round trip (the cluster's socket from slurm.conf)."""
    timeout = ctx.thresholds["tool_timeout_s"]
    sock = [f"--socket={ctx.munge_socket}"] if ctx.munge_socket else []
    cred = ctx.tools.run(["munge", "-n", *sock], timeout=timeout)
    if cred is None:
        return skip("munge not found")
    value = {"socket": ctx.munge_socket}
    if cred.rc != 0:
        return fail(f"munge cannot encode: {cred.err.strip() or cred.rc}", "start munged "
                    "(systemctl restart munge) and check /etc/munge/munge.key", value)
    dec = ctx.tools.run(["unmunge", *sock], timeout=timeout, stdin=cred.out)
    if dec is None:
        return skip("unmunge not found", value)
    if dec.rc != 0 or "STATUS:" not in dec.out or "Success" not in dec.out:
        return fail(f"unmunge rejects a fresh credential: {dec.err.strip() or dec.out[:80]}",
                    "check munged, the munge key and the clock", value)
    return ok("munge round trip", value)


def check_clock(ctx: NodeContext) -> CheckResult:
    """Clock synchronisation from chronyc tracking, else timedatectl."""
    t = ctx.thresholds
    timeout = t["tool_timeout_s"]
    chrony = ctx.tools.run(["chronyc", "-n", "tracking"], timeout=timeout)
    if chrony is not None and chrony.rc == 0:
        m = re.search(r"System time\s*:\s*([\d.]+) seconds (fast|slow)", chrony.out)
        leap = re.search(r"Leap status\s*:\s*(.+)", chrony.out)
        if not m:
            return warn("chronyc tracking gave no offset", "check chronyd", chrony.out[:200])
        offset = float(m.group(1))
        value = {"offset_s": offset, "leap": leap.group(1).strip() if leap else None}
        expected = {"max_offset_s": t["clock_warn_offset_s"]}
        if value["leap"] and value["leap"] != "Normal":
            return fail(f"chrony not synchronised ({value['leap']})", "restart chronyd; check "
                        "the Amazon Time Sync Service (169.254.169.123)", value, expected)
        if offset >= t["clock_fail_offset_s"]:
            return fail(f"clock off by {offset:.3f}s", "restart chronyd", value, expected)
        if offset >= t["clock_warn_offset_s"]:
            return warn(f"clock off by {offset:.3f}s", "check chronyd", value, expected)
        return ok(f"chrony synchronised, offset {offset * 1000:.1f} ms", value, expected)
    td = ctx.tools.run(["timedatectl", "show", "-p", "NTPSynchronized", "--value"],
                       timeout=timeout)
    if td is not None and td.rc == 0 and td.out.strip() in ("yes", "no"):
        if td.out.strip() == "yes":
            return ok("timedatectl: NTP synchronised", True, True)
        return warn("timedatectl: NTP not synchronised", "start chronyd", False, True)
    return skip("no chronyc or working timedatectl to ask")


def check_disk(ctx: NodeContext) -> CheckResult:
    """Free space on the local disks (/ and /tmp by default)."""
    t = ctx.thresholds
    value: dict[str, dict[str, float]] = {}
    worst: tuple[float, str] | None = None
    for path in t["disk_paths"]:
        try:
            st = os.statvfs(path)
        except OSError as exc:
            return fail(f"{path}: {exc.strerror}", "check the local disk", value)
        pct = 100.0 * st.f_bavail / st.f_blocks if st.f_blocks else 0.0
        value[path] = {"free_pct": round(pct, 1),
                       "free_gib": round(st.f_bavail * st.f_frsize / 2**30, 2)}
        if worst is None or pct < worst[0]:
            worst = (pct, path)
    expected = {"min_free_pct": t["disk_warn_free_pct"]}
    if worst is None:
        return skip("no disk paths configured")
    pct, path = worst
    if pct < t["disk_fail_free_pct"]:
        return fail(f"{path} {pct:.1f}% free", "clean up the local disk (old containers, "
                    "core dumps, /tmp)", value, expected)
    if pct < t["disk_warn_free_pct"]:
        return warn(f"{path} {pct:.1f}% free", "clean up the local disk", value, expected)
    return ok(f"local disks {pct:.0f}%+ free", value, expected)
