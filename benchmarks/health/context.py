"""What a node knows when it checks itself: its name, its expectations, thresholds, tools.

Expectations come from an expectations file (``pctk health expectations`` or the sweep
writes it from the instance catalog)::

    {"schema": "pctk.health-expect/v1",
     "instance_types": {"p5.48xlarge": {"gpu_count": 8, "gpu_model": "H100",
                         "gpu_memory_mib": 81920, "efa_interfaces": 32,
                         "nccl_all_reduce_busbw_gbps": 370.0, "nccl_algo": "Ring"}},
     "nodes": {"gpu-st-p5-1": "p5.48xlarge"},          # optional
     "mounts": ["/fsx", "/home"], "thresholds": {...}, "tool_path": [], "munge_socket": null}

The node's instance type comes from ``--instance-type``, the file's ``nodes`` map,
``PCTK_INSTANCE_TYPE``, or the node's Slurm features (ParallelCluster lists the instance
type there).
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import slurmnode
from benchmarks.bands import NODE_BUSBW
from benchmarks.health.tools import Tools

THRESHOLDS_FILE = Path(__file__).resolve().parent / "thresholds.json"
DEFAULT_MOUNTS = ("/fsx", "/home")


def load_thresholds(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.loads(THRESHOLDS_FILE.read_text(encoding="utf-8"))
    data.pop("_comment", None)
    # the busbw band is a verdict band: benchmarks/bands.py holds it (NODE_BUSBW)
    data["nccl_warn_fraction"] = NODE_BUSBW.warn_below
    data["nccl_fail_fraction"] = NODE_BUSBW.fail_below
    data.update(overrides or {})
    return data


@dataclass
class NodeContext:
    node: str
    instance_type: str | None
    expect: dict[str, Any]  # this instance type's expectations; empty when unknown
    thresholds: dict[str, Any]
    mounts: list[str]
    tools: Tools
    munge_socket: str | None = None
    dcgm_level: int = 1
    slurm_conf: str | None = None
    notes: list[str] = field(default_factory=list)


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _features_instance_type(node: str, known: list[str], tools: Tools) -> str | None:
    feats = slurmnode.node_features(node, timeout=5, path=tools.path)
    return next((f for f in feats if f in known), None)


def slurm_conf_setting(slurm_conf: str | None, key: str) -> str | None:
    """One ``Key=value`` from slurm.conf (first occurrence, case-insensitive key)."""
    if not slurm_conf:
        return None
    try:
        text = Path(slurm_conf).read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        k, _, v = line.partition("=")
        if k.strip().lower() == key.lower() and v:
            return v.strip()
    return None


def munge_socket_from_conf(slurm_conf: str | None) -> str | None:
    """``AuthInfo=socket=/path`` in slurm.conf names a non-default munge socket."""
    info = slurm_conf_setting(slurm_conf, "AuthInfo") or ""
    m = re.search(r"socket=([^,\s]+)", info)
    return m.group(1) if m else None


def build_context(
    *,
    node: str | None = None,
    expect_file: str | None = None,
    instance_type: str | None = None,
    mounts: list[str] | None = None,
    tool_path: list[str] | None = None,
    munge_socket: str | None = None,
    dcgm_level: int = 1,
) -> NodeContext:
    name = node or node_name()
    spec: dict[str, Any] = {}
    if expect_file:
        spec = json.loads(Path(expect_file).read_text(encoding="utf-8"))
    types: dict[str, Any] = spec.get("instance_types") or {}
    tools = Tools([*(tool_path or []), *(spec.get("tool_path") or [])], name)
    itype = (instance_type or (spec.get("nodes") or {}).get(name)
             or os.environ.get("PCTK_INSTANCE_TYPE"))
    if not itype and types:
        itype = _features_instance_type(name, list(types), tools)
    slurm_conf = os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    ctx = NodeContext(
        node=name,
        instance_type=itype,
        expect=dict(types.get(itype, {})) if itype else {},
        thresholds=load_thresholds(spec.get("thresholds")),
        mounts=list(mounts or spec.get("mounts") or DEFAULT_MOUNTS),
        tools=tools,
        munge_socket=munge_socket or spec.get("munge_socket")
        or munge_socket_from_conf(slurm_conf),
        dcgm_level=dcgm_level,
        slurm_conf=slurm_conf,
    )
    if itype and itype not in types:
        ctx.notes.append(f"instance type {itype} has no expectations in the file")
    return ctx
