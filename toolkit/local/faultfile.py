"""``<state>/faults.json``, the faults armed on a twin, keyed by kind: ``ice`` (capacity
faults, :mod:`toolkit.local.capacity`), ``slow-net`` and ``slow-cpu`` (:mod:`toolkit.local.faults`).

This module is its only reader and writer. Every change is a read-modify-write under one
exclusive lock (``<state>/.faults.lock``), so a ResumeProgram using up an ICE fault, `pctk
local fault` and `pctk local down` never lose each other's changes; the file is replaced
whole (written aside, renamed), so a plain read (``read``: `pctk local status`, a user who
may not write the twin's folder) sees one version or the next, never half of one. It also
holds what a node's start must know of the file: a new slurmd of a node with a slow-cpu
fault joins the fault's cgroup.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkit.fsutil import atomic_write_json

FAULTS = "faults.json"


@contextlib.contextmanager
def faults(state_dir: Path) -> Iterator[dict[str, Any]]:
    """faults.json, read and written back under an exclusive lock."""
    path = state_dir / FAULTS
    if not state_dir.is_dir():  # no twin here: no faults, nothing to write
        yield {}
        return
    with open(state_dir / ".faults.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            data = _load(path)
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before:
                atomic_write_json(path, data)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read(state_dir: Path) -> dict[str, Any]:
    """faults.json as it stands (empty when absent or unreadable)."""
    return _load(state_dir / FAULTS)


def exists(state_dir: Path) -> bool:
    return (state_dir / FAULTS).exists()


def move_pids(procs_file: Path, pids: list[int]) -> None:
    """Write each pid into a cgroup's ``cgroup.procs`` (a process that exited is skipped)."""
    for pid in pids:
        with contextlib.suppress(OSError):  # exited meanwhile
            procs_file.write_text(f"{pid}\n")


def follow_new_slurmd(state_dir: Path, node: str, pid: int) -> None:
    """A node's slurmd started anew (powered up again, replaced) joins the node's slow-cpu
    group, as a real slow instance stays slow across a restart; the fault is not lost."""
    fault = read(state_dir).get("slow-cpu")
    if isinstance(fault, dict) and fault.get("node") == node and \
            Path(str(fault.get("cgroup"))).is_dir():
        move_pids(Path(str(fault["cgroup"])) / "cgroup.procs", [pid])
