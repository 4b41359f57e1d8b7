"""EFA devices through libfabric's ``fi_info -p efa``, and the software stack's versions."""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import Any

from benchmarks.health.context import NodeContext
from benchmarks.health.gpu_nvml import nvml_session
from benchmarks.health.status import CheckResult, fail, ok, skip

EFA_INSTALLED = Path("/opt/amazon/efa_installed_packages")
_DOMAIN = re.compile(r"^\s*domain:\s*(\S+)", re.M)
_PROVIDER = re.compile(r"^\s*provider:\s*(\S+)", re.M)


def efa_domains(fi_info_out: str) -> list[str]:
    """Distinct EFA devices in ``fi_info -p efa`` output (``rdmap0s6-rdm`` -> ``rdmap0s6``)."""
    blocks = re.split(r"(?m)^(?=provider:)", fi_info_out)
    devs = []
    for b in blocks:
        prov = _PROVIDER.search(b)
        dom = _DOMAIN.search(b)
        if prov and dom and prov.group(1) == "efa":
            devs.append(re.sub(r"-(rdm|dgrm)$", "", dom.group(1)))
    return sorted(set(devs))


def check_efa(ctx: NodeContext) -> CheckResult:
    """EFA device count from fi_info -p efa against the catalog."""
    expected = ctx.expect.get("efa_interfaces")
    if not expected:
        why = f"{ctx.instance_type} has no EFA" if ctx.instance_type else "unknown instance type"
        return skip(f"no EFA expected ({why})", expected=expected)
    timeout = ctx.thresholds["tool_timeout_s"]
    r = ctx.tools.run(["fi_info", "-p", "efa"], timeout=timeout)
    if r is None:
        return skip("fi_info not found (EFA software not installed here?)", expected=expected)
    devs = efa_domains(r.out) if r.rc == 0 else []
    if not devs:
        listed = ctx.tools.run(["fi_info", "-l"], timeout=timeout)
        provs = sorted(set(re.findall(r"^(\w+):", listed.out, re.M))) if listed else []
        detail = (r.err.strip() or r.out.strip()).splitlines()[-1:] or ["no output"]
        return fail(f"fi_info has no efa provider ({detail[0]}); providers: "
                    f"{', '.join(provs) or 'none'}",
                    "check the EFA driver (lsmod | grep efa) and the security group; "
                    "reinstall the EFA installer or replace the instance", 0, expected)
    if len(devs) < expected:
        return fail(f"{len(devs)} of {expected} EFA devices", "an EFA interface is missing: "
                    "reboot; replace the instance if it persists", len(devs), expected)
    return ok(f"{len(devs)} EFA devices", len(devs), expected)


def _first_line(text: str, pattern: str) -> str | None:
    m = re.search(pattern, text, re.M)
    return m.group(1).strip() if m else None


def _nccl_version() -> str | None:
    dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64", "/opt/nccl/build/lib",
            "/usr/lib64", "/usr/local/lib"]
    for d in dirs:
        for lib in sorted(glob.glob(os.path.join(d, "libnccl.so.2.*"))):
            return lib.rsplit("libnccl.so.", 1)[1]
    return None


def software_versions(ctx: NodeContext) -> dict[str, Any]:
    timeout = ctx.thresholds["tool_timeout_s"]
    v: dict[str, Any] = {"libfabric": None, "efa_installer": None, "nccl": _nccl_version(),
                         "aws_ofi_nccl": None, "driver": None, "cuda": None}
    r = ctx.tools.run(["fi_info", "--version"], timeout=timeout)
    if r and r.rc == 0:
        v["libfabric"] = _first_line(r.out, r"^libfabric:\s*(\S+)")
    if EFA_INSTALLED.exists():
        text = EFA_INSTALLED.read_text(errors="replace")
        v["efa_installer"] = _first_line(text, r"EFA installer version:\s*(\S+)")
        v["aws_ofi_nccl"] = _first_line(text, r"aws-ofi-nccl\S*\s+(\S+)")
    if v["aws_ofi_nccl"] is None and glob.glob("/opt/amazon/ofi-nccl/lib*/libnccl-net*.so*"):
        v["aws_ofi_nccl"] = "installed (version unknown)"
    proc = Path("/proc/driver/nvidia/version")
    if proc.exists():
        v["driver"] = _first_line(proc.read_text(errors="replace"), r"Kernel Module\s+(\S+)")
    nvml = nvml_session()
    if not isinstance(nvml, str):
        nv = nvml[0]
        v["driver"] = v["driver"] or str(nv.nvmlSystemGetDriverVersion())
        cuda = int(nv.nvmlSystemGetCudaDriverVersion())
        v["cuda"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
    return v


def check_software(ctx: NodeContext) -> CheckResult:
    """INFO: versions of the stack that decides performance; OK when any of it is found."""
    v = software_versions(ctx)
    found = {k: x for k, x in v.items() if x}
    if not found:
        return skip("no GPU/EFA software stack found (libfabric, EFA, NCCL, driver, CUDA)", v)
    missing = [k for k, x in v.items() if not x]
    msg = ", ".join(f"{k} {x}" for k, x in found.items())
    return ok(msg + (f"; not found: {', '.join(missing)}" if missing else ""), v)
