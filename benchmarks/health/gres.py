"""This node's GPU device files as Slurm's gres.conf names them (``File=`` lines).

Reads ``gres.conf`` beside ``SLURM_CONF`` and follows ``Include`` lines (ParallelCluster keeps
its GPU lines in an included file). Lines with ``NodeName=`` apply to the listed nodes,
lines without it to every node.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from benchmarks.distenv import expand_hostlist


def _lines(path: Path, depth: int = 0) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.lower().startswith("include ") and depth < 4:
            target = Path(line.split(None, 1)[1].strip())
            target = target if target.is_absolute() else path.parent / target
            for inc in sorted(target.parent.glob(target.name)):
                out += _lines(inc, depth + 1)
        else:
            out.append(line)
    return out


def _fields(line: str) -> dict[str, str]:
    out = {}
    for tok in shlex.split(line):
        key, sep, value = tok.partition("=")
        if sep:
            out[key.lower()] = value
    return out


def gres_conf_path(slurm_conf: str | None) -> Path:
    base = Path(slurm_conf) if slurm_conf else Path("/etc/slurm/slurm.conf")
    return base.parent / "gres.conf"


def node_gpu_files(gres_conf: Path, node: str) -> list[str] | None:
    """Device paths of ``Name=gpu`` lines for this node; None without a gres.conf."""
    if not gres_conf.exists():
        return None
    files: list[str] = []
    for line in _lines(gres_conf):
        f = _fields(line)
        if f.get("name") != "gpu" or "file" not in f:
            continue
        if "nodename" in f and node not in expand_hostlist(f["nodename"]):
            continue
        files += expand_hostlist(f["file"])
    return files
