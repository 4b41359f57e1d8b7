"""Which checks run at which level, in what order; one node's report."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchmarks.health.context import NodeContext
from benchmarks.health.efa import check_efa, check_software
from benchmarks.health.gpu_devices import check_gpu_devices
from benchmarks.health.gpu_nvml import (
    check_gpu_count,
    check_gpu_ecc,
    check_gpu_memory,
    check_gpu_pcie,
    check_gpu_remap,
    check_gpu_throttle,
)
from benchmarks.health.perf import check_dcgm, check_nccl
from benchmarks.health.status import CheckResult, fail, warn
from benchmarks.health.storage import check_storage
from benchmarks.health.system import check_clock, check_disk, check_munge
from benchmarks.health.xid import check_gpu_xid

NODE_SCHEMA = "pctk.health-node/v1"
LEVELS = ("quick", "full")
REASON_MAX = 200

Check = Callable[[NodeContext], CheckResult]
# (name, function, lowest level that runs it); the order is also the drain-reason priority
CHECKS: tuple[tuple[str, Check, str], ...] = (
    ("gpu_devices", check_gpu_devices, "quick"),
    ("gpu_count", check_gpu_count, "quick"),
    ("gpu_ecc", check_gpu_ecc, "quick"),
    ("gpu_remap", check_gpu_remap, "quick"),
    ("gpu_xid", check_gpu_xid, "quick"),
    ("gpu_throttle", check_gpu_throttle, "quick"),
    ("gpu_pcie", check_gpu_pcie, "quick"),
    ("gpu_memory", check_gpu_memory, "quick"),
    ("efa", check_efa, "quick"),
    ("software", check_software, "quick"),
    ("storage", check_storage, "quick"),
    ("munge", check_munge, "quick"),
    ("clock", check_clock, "quick"),
    ("disk", check_disk, "quick"),
    ("nccl", check_nccl, "full"),
    ("dcgm", check_dcgm, "full"),
)
CHECK_NAMES = tuple(name for name, _, _ in CHECKS)


def checks_for(level: str, only: list[str] | None = None) -> list[tuple[str, Check]]:
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    allowed = LEVELS[: LEVELS.index(level) + 1]
    unknown = sorted(set(only or []) - set(CHECK_NAMES))
    if unknown:
        raise ValueError(f"unknown check {', '.join(unknown)}; known: {', '.join(CHECK_NAMES)}")
    return [(n, f) for n, f, lvl in CHECKS if lvl in allowed and (not only or n in only)]


def run_one(fn: Check, ctx: NodeContext) -> CheckResult:
    try:
        return fn(ctx)
    except Exception as exc:
        # an NVML error here means the GPU itself misbehaves; anything else is our bug
        if type(exc).__name__.startswith("NVMLError"):
            return fail(f"NVML error: {exc}", "reset the GPU or reboot; replace if it persists")
        return warn(f"check crashed: {type(exc).__name__}: {exc}",
                    "report this to the pctk maintainers")


def run_checks(ctx: NodeContext, level: str, only: list[str] | None = None) -> dict[str, Any]:
    """One node's report: ``{"node", "instance_type", "level", "checks": {name: result}}``."""
    start = time.monotonic()
    results: dict[str, Any] = {}
    timings: dict[str, float] = {}
    for name, fn in checks_for(level, only):
        t0 = time.monotonic()
        results[name] = run_one(fn, ctx).to_json()
        timings[name] = round(time.monotonic() - t0, 3)
    return {
        "schema": NODE_SCHEMA,
        "node": ctx.node,
        "instance_type": ctx.instance_type,
        "level": level,
        "checks": results,
        "timings_s": timings,
        "elapsed_s": round(time.monotonic() - start, 3),
        "notes": list(ctx.notes),
    }


def drain_reason(checks: dict[str, Any]) -> str | None:
    """``pctk: <check>: <message>`` for the first failing check, or None if none fails."""
    for name, body in checks.items():
        if body.get("status") == "FAIL":
            reason = f"pctk: {name}: {body.get('message', '')}"
            return reason[:REASON_MAX]
    return None
