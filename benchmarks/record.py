"""The one result record every benchmark and health run writes (schema ``pctk.result/v1``).

Node-side module: standard library only. A record is a JSON object::

    {
      "schema": "pctk.result/v1",
      "id": "<uuid4 hex>",
      "kind": "nccl-tests" | "collectives" | "fsdp" | "health",
      "created": "2026-12-02T12:00:00Z",
      "cluster": {"name": str|null, "instance_type": str|null, "nodes": int|null,
                  "hosts": [str], "partition": str|null, "job_id": str|null},
      "software": {"torch": ..., "nccl": ..., "aws_ofi_nccl": ..., "efa": ..., "libfabric": ...,
                   "driver": ..., "cuda": ..., "python": ...},   # null where unknown
      "params": {...},      # what was asked for (kind-specific)
      "metrics": {...},     # what was measured (kind-specific)
      "verdict": {"status": "PASS"|"WARN"|"FAIL"|"UNKNOWN", "reasons": [str]},
      "raw_logs": [str]     # paths of raw logs kept beside the record (relative to it)
    }

Records are written atomically (temporary file + rename) so a reader never sees half of one.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

SCHEMA = "pctk.result/v1"
KINDS = ("nccl-tests", "collectives", "fsdp", "health")
STATUSES = ("PASS", "WARN", "FAIL", "UNKNOWN")


class RecordError(ValueError):
    """A file that is not a valid pctk result record."""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.(?:\d*x?large|metal(?:-\d+xl)?)$")


def _scontrol(*args: str) -> str:
    try:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True,
                              timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _cluster_name() -> str | None:
    if name := os.environ.get("SLURM_CLUSTER_NAME"):
        return name
    for line in _scontrol("show", "config").splitlines():
        if line.startswith("ClusterName"):
            return line.split("=", 1)[1].strip() or None
    return None


def _instance_type() -> str | None:
    """``PCTK_INSTANCE_TYPE``, else the instance type among this node's Slurm features
    (ParallelCluster, and the twin, list it there: ``static,p5.48xlarge,p5,efa,gpu``)."""
    if itype := os.environ.get("PCTK_INSTANCE_TYPE"):
        return itype
    node = os.environ.get("SLURMD_NODENAME")
    if not node:
        return None
    for token in _scontrol("show", "node", node, "-o").split():
        if token.startswith("AvailableFeatures="):
            for feature in token.split("=", 1)[1].split(","):
                if _INSTANCE_TYPE.match(feature):
                    return feature
    return None


def cluster_from_env() -> dict[str, Any]:
    """What the Slurm environment says about where this runs (empty fields outside Slurm)."""
    env = os.environ
    nodes = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    return {
        "name": _cluster_name(),
        "instance_type": _instance_type(),
        "nodes": int(nodes) if nodes and nodes.isdigit() else None,
        "hosts": [],
        "partition": env.get("SLURM_JOB_PARTITION"),
        "job_id": env.get("SLURM_JOB_ID"),
    }


def software_versions() -> dict[str, str | None]:
    """Versions of the software stack that decide performance; None where not found."""
    versions: dict[str, str | None] = {
        "python": platform.python_version(),
        "torch": None,
        "cuda": None,
        "nccl": None,
        "aws_ofi_nccl": os.environ.get("PCTK_AWS_OFI_NCCL_VERSION"),
        "efa": None,
        "libfabric": None,
        "driver": None,
        "host": socket.gethostname(),
    }
    try:
        import torch

        versions["torch"] = torch.__version__
        versions["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            nccl = torch.cuda.nccl.version()
            versions["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    except Exception:  # torch absent or broken: the record still gets written
        pass
    efa_version = Path("/opt/amazon/efa_installed_packages")
    if efa_version.exists():
        for line in efa_version.read_text(errors="replace").splitlines():
            if "EFA installer version" in line:
                versions["efa"] = line.split(":", 1)[-1].strip()
    driver = Path("/proc/driver/nvidia/version")
    if driver.exists():
        text = driver.read_text(errors="replace")
        for token in text.split():
            if token.count(".") >= 1 and token.replace(".", "").isdigit():
                versions["driver"] = token
                break
    return versions


def new_record(
    kind: str,
    *,
    params: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    status: str = "UNKNOWN",
    reasons: list[str] | None = None,
    cluster: dict[str, Any] | None = None,
    software: dict[str, Any] | None = None,
    raw_logs: list[str] | None = None,
    describe_this_machine: bool = True,
) -> dict[str, Any]:
    """A record; ``describe_this_machine=False`` for a record of a run elsewhere (a parsed
    log): no Slurm environment or scontrol queries, ``cluster`` and ``software`` as given."""
    if kind not in KINDS:
        raise RecordError(f"unknown record kind {kind!r}; expected one of {', '.join(KINDS)}")
    if status not in STATUSES:
        raise RecordError(f"unknown status {status!r}; expected one of {', '.join(STATUSES)}")
    base_cluster: dict[str, Any] = cluster_from_env() if describe_this_machine else {
        "name": None, "instance_type": None, "nodes": None, "hosts": [], "partition": None,
        "job_id": None}
    base_cluster.update(cluster or {})
    return {
        "schema": SCHEMA,
        "id": uuid.uuid4().hex,
        "kind": kind,
        "created": _now(),
        "cluster": base_cluster,
        "software": software if software is not None else software_versions(),
        "params": params or {},
        "metrics": metrics or {},
        "verdict": {"status": status, "reasons": list(reasons or [])},
        "raw_logs": list(raw_logs or []),
    }


def validate_record(rec: Any) -> dict[str, Any]:
    """Check the envelope (not the kind-specific metrics); return the record."""
    if not isinstance(rec, dict):
        raise RecordError("a result record is a JSON object")
    if rec.get("schema") != SCHEMA:
        raise RecordError(f"schema is {rec.get('schema')!r}, expected {SCHEMA!r}")
    for key, typ in (("id", str), ("kind", str), ("created", str), ("cluster", dict),
                     ("software", dict), ("params", dict), ("metrics", dict),
                     ("verdict", dict), ("raw_logs", list)):
        if not isinstance(rec.get(key), typ):
            raise RecordError(f"field {key!r} missing or not a {typ.__name__}")
    if rec["kind"] not in KINDS:
        raise RecordError(f"unknown kind {rec['kind']!r}")
    if rec["verdict"].get("status") not in STATUSES:
        raise RecordError(f"unknown verdict status {rec['verdict'].get('status')!r}")
    return rec


def write_record(path: str | os.PathLike[str], rec: dict[str, Any]) -> Path:
    """Validate and write atomically; returns the path."""
    validate_record(rec)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(rec, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    try:
        return validate_record(data)
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}") from None
