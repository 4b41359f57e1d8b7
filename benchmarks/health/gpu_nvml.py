"""GPU checks through NVML (``pynvml`` from nvidia-ml-py): count and model, ECC, row
remapping / retired pages, throttle reasons, PCIe link, memory. SKIP where NVML is absent."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from benchmarks.health.context import NodeContext
from benchmarks.health.status import CheckResult, fail, ok, skip, warn

# NVML clock-event reason bits (nvml.h nvmlClocksEventReason*); names are ours
THROTTLE_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


@cache
def nvml_session() -> tuple[Any, list[Any]] | str:
    """(pynvml module, device handles), or why NVML cannot be used here."""
    try:
        import pynvml
    except ImportError:
        return "pynvml (nvidia-ml-py) is not installed"
    try:
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                   for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return f"NVML not usable: {exc}"
    return pynvml, handles


def _per_gpu(ctx: NodeContext, probe: Callable[[Any, Any], Any]
             ) -> tuple[Any, list[Any]] | CheckResult:
    """Run ``probe(pynvml, handle)`` on every GPU; SKIP result when NVML or GPUs are absent."""
    s = nvml_session()
    if isinstance(s, str):
        return skip(s)
    nv, handles = s
    if not handles:
        return skip("NVML sees no GPUs")
    values = []
    for h in handles:
        try:
            values.append(probe(nv, h))
        except nv.NVMLError_NotSupported:
            values.append(None)
    if all(v is None for v in values):
        return skip("not supported by these GPUs")
    return nv, values


# name tokens that mark another board of the same chip (H100 NVL, H100 PCIe, H200 NVL)
OTHER_BOARD_TOKENS = frozenset({"NVL", "PCIE"})


def model_matches(catalog_model: str, nvml_name: str) -> bool:
    """``A100-40GB`` matches ``NVIDIA A100-SXM4-40GB``: every part of the catalog name is a
    whole word of the NVML name (so B200 is not GB200, A10G is not A10), and the NVML name
    names no other board of that chip (H100 is not ``NVIDIA H100 NVL``)."""
    tokens = set(re.split(r"[\s\-]+", nvml_name.upper().strip()))
    parts = set(catalog_model.upper().split("-"))
    return parts <= tokens and not (tokens & OTHER_BOARD_TOKENS) - parts


def check_gpu_count(ctx: NodeContext) -> CheckResult:
    """NVML GPU count and model against the catalog."""
    s = nvml_session()
    expected = ctx.expect.get("gpu_count")
    model = ctx.expect.get("gpu_model")
    if isinstance(s, str):
        return skip(s, expected=expected)
    nv, handles = s
    names = [str(nv.nvmlDeviceGetName(h)) for h in handles]
    value = {"count": len(names), "models": sorted(set(names))}
    want = {"count": expected, "model": model}
    if expected is not None and len(names) != expected:
        return fail(f"NVML sees {len(names)} GPUs, {ctx.instance_type} has {expected}",
                    "reboot; if a GPU stays missing, replace the instance", value, want)
    wrong = [n for n in names if model and not model_matches(model, n)]
    if wrong:
        return fail(f"GPU model {wrong[0]} is not {model}", "check the instance type of this "
                    "node and the cluster config", value, want)
    return ok(f"{len(names)} x {names[0] if names else 'none'}", value, want)


def check_gpu_ecc(ctx: NodeContext) -> CheckResult:
    """Uncorrectable (volatile) ECC errors per GPU."""
    def probe(nv: Any, h: Any) -> int:
        return int(nv.nvmlDeviceGetTotalEccErrors(
            h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC))

    got = _per_gpu(ctx, probe)
    if isinstance(got, CheckResult):
        return got
    _, counts = got
    bad = {i: c for i, c in enumerate(counts) if c}
    if bad:
        return fail(f"uncorrectable ECC errors on GPU {', '.join(map(str, bad))}",
                    "drain the node and reset the GPU (or reboot); replace if they recur",
                    counts, 0)
    return ok("no uncorrectable ECC errors since the last driver load", counts, 0)


def check_gpu_remap(ctx: NodeContext) -> CheckResult:
    """Row remapping (A100 and later) or page retirement (older GPUs)."""
    t = ctx.thresholds

    def probe(nv: Any, h: Any) -> dict[str, Any]:
        try:
            corr, unc, pending, failed = nv.nvmlDeviceGetRemappedRows(h)
            return {"pending": bool(pending), "failed": bool(failed), "uncorrectable": int(unc),
                    "correctable": int(corr)}
        except nv.NVMLError_NotSupported:
            pend = nv.nvmlDeviceGetRetiredPagesPendingStatus(h)
            pages = nv.nvmlDeviceGetRetiredPages(
                h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
            return {"pending": bool(pend), "failed": False, "retired_pages": len(pages)}

    got = _per_gpu(ctx, probe)
    if isinstance(got, CheckResult):
        return got
    _, rows = got
    failed = [i for i, r in enumerate(rows) if r and r["failed"]]
    pending = [i for i, r in enumerate(rows) if r and r["pending"]]
    pages = max((r.get("retired_pages", 0) for r in rows if r), default=0)
    if failed:
        return fail(f"row remapping failed on GPU {failed}", "replace the instance", rows)
    if pending:
        return fail(f"row remap / page retirement pending on GPU {pending}",
                    "drain, then reset the GPU (nvidia-smi -r) or reboot", rows)
    if pages >= t["retired_pages_fail"]:
        return fail(f"{pages} retired pages", "replace the instance", rows)
    if pages >= t["retired_pages_warn"]:
        return warn(f"{pages} retired pages", "watch; replace when it grows", rows)
    return ok("no pending or failed remaps", rows)


def check_gpu_throttle(ctx: NodeContext) -> CheckResult:
    """Hardware clock throttle reasons (slowdown, thermal, power brake)."""
    t = ctx.thresholds

    def probe(nv: Any, h: Any) -> list[str]:
        getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nv.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = int(getter(h))
        return [name for bit, name in THROTTLE_BITS.items() if mask & bit]

    got = _per_gpu(ctx, probe)
    if isinstance(got, CheckResult):
        return got
    _, reasons = got
    value = {str(i): r for i, r in enumerate(reasons) if r}
    bad = sorted({x for r in reasons if r for x in r if x in t["throttle_fail"]})
    if bad:
        return fail(f"GPU clocks held down: {', '.join(bad)}", "check cooling and power "
                    "(nvidia-smi -q -d PERFORMANCE); replace the instance", value)
    soft = sorted({x for r in reasons if r for x in r if x in t["throttle_warn"]})
    if soft:
        return warn(f"GPU clocks held down: {', '.join(soft)}", "check GPU temperatures", value)
    return ok("no hardware throttling", value)


def check_gpu_pcie(ctx: NodeContext) -> CheckResult:
    """PCIe link width at its maximum (generation reported only: idle GPUs downshift)."""
    def probe(nv: Any, h: Any) -> dict[str, int]:
        return {"gen": int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
                "max_gen": int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
                "width": int(nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
                "max_width": int(nv.nvmlDeviceGetMaxPcieLinkWidth(h))}

    got = _per_gpu(ctx, probe)
    if isinstance(got, CheckResult):
        return got
    _, links = got
    # an idle GPU drops its link generation to save power; a narrower link is a fault
    narrow = [i for i, link in enumerate(links) if link and link["width"] < link["max_width"]]
    if narrow:
        i = narrow[0]
        return fail(f"GPU {i} PCIe link x{links[i]['width']} of x{links[i]['max_width']}",
                    "reseat or replace: reboot, then replace the instance if it persists",
                    links, "full width")
    return ok("PCIe links at full width", links, "full width")


def expected_memory_mib(expect: dict[str, Any]) -> float | None:
    """Per-GPU memory AWS publishes for this instance type (MiB); older files carry GiB."""
    if expect.get("gpu_memory_mib"):
        return float(expect["gpu_memory_mib"])
    gib = expect.get("gpu_memory_gib")
    return float(gib) * 1024 if gib else None


def memory_total_short(total_bytes: int, expected_mib: float | None, min_fraction: float) -> bool:
    """True when NVML's total is clearly below the published size.

    The published figure is AWS's per-instance-type ``SizeInMiB``; for GDDR parts it is
    already net of the ECC reserve (A10G 22,888 MiB, NVML reports about 23,028), so a
    healthy GPU sits near or above it and ``min_fraction`` only absorbs driver reserves.
    """
    if not expected_mib:
        return False
    return total_bytes / 2**20 < expected_mib * min_fraction


def check_gpu_memory(ctx: NodeContext) -> CheckResult:
    """GPU memory total against the catalog, and none held before a job."""
    t = ctx.thresholds
    expected_mib = expected_memory_mib(ctx.expect)

    def probe(nv: Any, h: Any) -> dict[str, float]:
        m = nv.nvmlDeviceGetMemoryInfo(h)
        return {"total_mib": m.total // 2**20, "total_gib": round(m.total / 2**30, 2),
                "used_gib": round(m.used / 2**30, 2), "free_gib": round(m.free / 2**30, 2)}

    got = _per_gpu(ctx, probe)
    if isinstance(got, CheckResult):
        return got
    _, mems = got
    for i, m in enumerate(mems):
        if not m:
            continue
        used = m["used_gib"] / m["total_gib"] if m["total_gib"] else 0.0
        if memory_total_short(m["total_mib"] * 2**20, expected_mib,
                              t["gpu_memory_min_total_fraction"]):
            return fail(f"GPU {i} has {m['total_mib']} MiB, expected about {expected_mib:g} MiB",
                        "replace the instance", mems, expected_mib)
        if used >= t["gpu_memory_fail_used_fraction"]:
            return fail(f"GPU {i}: {m['used_gib']} GiB in use before any job",
                        "find leftover processes (nvidia-smi); kill them or reboot", mems)
        if used >= t["gpu_memory_warn_used_fraction"]:
            return warn(f"GPU {i}: {m['used_gib']} GiB in use", "look for leftover processes "
                        "(nvidia-smi --query-compute-apps=pid,used_memory --format=csv)", mems)
    return ok("GPU memory free", mems, expected_mib)
