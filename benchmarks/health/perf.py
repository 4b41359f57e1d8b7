"""Slow checks for the ``full`` level: single-node NCCL all_reduce busbw and DCGM diagnostics."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from benchmarks.health.context import NodeContext
from benchmarks.health.gpu_nvml import nvml_session
from benchmarks.health.status import CheckResult, fail, ok, skip, warn
from benchmarks.nccltable import parse_rows


def parse_nccl_tests_busbw(text: str) -> list[tuple[int, float]]:
    """(size_bytes, out-of-place busbw GB/s) per data row of nccl-tests output, read by the
    one nccl-tests table parser (:mod:`benchmarks.nccltable`, the driver's too)."""
    return [(r.size_bytes, m.busbw_gbps) for r in parse_rows(text.splitlines())
            if (m := r.primary()) is not None]


def _gpu_count(ctx: NodeContext) -> int:
    s = nvml_session()
    if not isinstance(s, str):
        return len(s[1])
    return int(ctx.expect.get("gpu_count") or 0)


def _torch_busbw(ctx: NodeContext, gpus: int, size: str) -> tuple[int, float] | str:
    """The largest-size all_reduce busbw from benchmarks.collectives under torchrun."""
    with tempfile.TemporaryDirectory(prefix="pctk-nccl-") as tmp:
        out = os.path.join(tmp, "record.json")
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc-per-node={gpus}", "-m", "benchmarks.collectives", "--ops",
                "all_reduce", "--min-bytes", size, "--max-bytes", size, "--backend", "nccl",
                "--out", out]
        try:
            r = subprocess.run(argv, capture_output=True, text=True,
                               timeout=ctx.thresholds["nccl_timeout_s"])
        except subprocess.TimeoutExpired:
            return "torch all_reduce sweep timed out"
        if r.returncode != 0 or not os.path.exists(out):
            return f"torch all_reduce sweep failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
        with open(out, encoding="utf-8") as fh:
            rec = json.load(fh)
    rows = [row for b in rec["metrics"].get("collectives", []) for row in b.get("rows", [])]
    if not rows:
        return "torch all_reduce sweep produced no rows"
    last = rows[-1]
    m = last.get("out_of_place") or last.get("in_place") or {}
    return int(last["size_bytes"]), float(m["busbw_gbps"])


def check_nccl(ctx: NodeContext) -> CheckResult:
    """Single-node all_reduce busbw (nccl-tests, else the torch sweep) against the catalog."""
    t = ctx.thresholds
    expected = ctx.expect.get("nccl_all_reduce_busbw_gbps")
    gpus = _gpu_count(ctx)
    if gpus == 0:
        return skip("no GPUs on this node", expected=expected)
    measured: tuple[int, float] | str
    r = ctx.tools.run(["all_reduce_perf", "-b", t["nccl_min_bytes"], "-e", t["nccl_max_bytes"],
                       "-f", "2", "-g", str(gpus)], timeout=t["nccl_timeout_s"])
    if r is not None:
        rows = parse_nccl_tests_busbw(r.out)
        measured = rows[-1] if r.rc == 0 and rows else \
            f"all_reduce_perf failed (rc {r.rc}): {(r.err.strip() or r.out.strip())[-160:]}"
        source = "nccl-tests"
    elif importlib.util.find_spec("torch") is not None and not isinstance(nvml_session(), str):
        measured = _torch_busbw(ctx, gpus, t["nccl_max_bytes"])
        source = "benchmarks.collectives"
    else:
        return skip("neither nccl-tests all_reduce_perf nor torch with GPUs found",
                    expected=expected)
    if isinstance(measured, str):
        return fail(measured, "run the NCCL test by hand with NCCL_DEBUG=INFO", None, expected)
    size, busbw = measured
    value: dict[str, Any] = {"busbw_gbps": busbw, "size_bytes": size, "source": source}
    if not expected:
        return ok(f"all_reduce {busbw:.1f} GB/s (no published figure for "
                  f"{ctx.instance_type or 'this instance type'})", value)
    frac = busbw / expected
    algo = ctx.expect.get("nccl_algo")
    msg = f"all_reduce {busbw:.1f} GB/s, {frac:.0%} of {expected:g}" + (
        f" (the {algo} figure: NCCL's algorithm is not pinned here)" if algo else "")
    if frac < t["nccl_fail_fraction"]:
        return fail(msg, "check NVLink (nvidia-smi nvlink -s, topo -m) and Xids; reboot",
                    value, expected)
    if frac < t["nccl_warn_fraction"]:
        return warn(msg, "check GPU clocks and NVLink", value, expected)
    return ok(msg, value, expected)


def dcgm_failures(report: Any) -> tuple[list[str], list[str]]:
    """(failed, warned) test names anywhere in ``dcgmi diag -j`` output."""
    failed: list[str] = []
    warned: list[str] = []

    def walk(node: Any, name: str) -> None:
        if isinstance(node, dict):
            here = str(node.get("name") or node.get("test_name") or name)
            status = str(node.get("status", "")).lower()
            if status == "fail":
                failed.append(here)
            elif status == "warn":
                warned.append(here)
            for v in node.values():
                walk(v, here)
        elif isinstance(node, list):
            for v in node:
                walk(v, name)

    walk(report, "diag")
    return sorted(set(failed)), sorted(set(warned))


def check_dcgm(ctx: NodeContext) -> CheckResult:
    """dcgmi diag at the chosen level (-r 1|2|3)."""
    level = ctx.dcgm_level
    r = ctx.tools.run(["dcgmi", "diag", "-r", str(level), "-j"],
                      timeout=ctx.thresholds["dcgm_timeout_s"])
    if r is None:
        return skip("dcgmi not found (DCGM not installed)")
    try:
        report = json.loads(r.out)
    except json.JSONDecodeError:
        return fail(f"dcgmi diag -r {level} failed (rc {r.rc}): "
                    f"{(r.err.strip() or r.out.strip())[-160:]}",
                    "check nv-hostengine (systemctl status nvidia-dcgm)", None, "pass")
    failed, warned = dcgm_failures(report)
    value = {"level": level, "failed": failed, "warned": warned}
    if failed:
        return fail(f"DCGM level {level}: {', '.join(failed)} failed",
                    "read dcgmi diag output; reset the GPU or replace the instance",
                    value, "pass")
    if warned:
        return warn(f"DCGM level {level}: warnings in {', '.join(warned)}",
                    "read dcgmi diag output", value, "pass")
    return ok(f"DCGM level {level} passed", value, "pass")
