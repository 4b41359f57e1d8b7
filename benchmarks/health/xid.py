"""NVIDIA Xid events in the kernel log (``NVRM: Xid (PCI:...): 79, ...``)."""

from __future__ import annotations

import os
import re

from benchmarks.health.context import NodeContext
from benchmarks.health.status import CheckResult, fail, ok, skip, warn

XID_LINE = re.compile(r"NVRM: Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)")


def read_kernel_log(ctx: NodeContext) -> tuple[str, str] | None:
    """(text, source) from dmesg, else journalctl -k; None when neither can be read."""
    timeout = ctx.thresholds["tool_timeout_s"]
    for argv in (["dmesg"], ["journalctl", "-k", "-q", "--no-pager", "-o", "short"]):
        r = ctx.tools.run(argv, timeout=timeout)
        if r is not None and r.rc == 0 and r.out.strip():
            return r.out, argv[0]
    return None


def parse_xids(text: str) -> list[tuple[str, int]]:
    return [(m.group("pci"), int(m.group("xid"))) for m in XID_LINE.finditer(text)]


def check_gpu_xid(ctx: NodeContext) -> CheckResult:
    """NVIDIA Xid events in the kernel log (dmesg / journalctl -k)."""
    if not os.path.exists("/proc/driver/nvidia/version"):
        return skip("no NVIDIA driver loaded (/proc/driver/nvidia/version absent)")
    log = read_kernel_log(ctx)
    if log is None:
        return skip("kernel log not readable (dmesg and journalctl -k failed)")
    text, source = log
    t = ctx.thresholds
    events = [(pci, x) for pci, x in parse_xids(text) if x not in t["xid_ignore"]]
    value = sorted({f"{pci}: {x}" for pci, x in events})
    critical = sorted({x for _, x in events if x in t["xid_fail"]})
    if critical:
        return fail(f"Xid {', '.join(map(str, critical))} in {source}", "drain; reset the GPU "
                    "or reboot; replace the instance if it recurs (see NVIDIA Xid catalog)",
                    value, [])
    if events:
        return warn(f"Xid {', '.join(sorted({str(x) for _, x in events}))} in {source}",
                    "look up the Xid in NVIDIA's catalog; watch for repeats", value, [])
    return ok(f"no Xid events in {source}", value, [])
