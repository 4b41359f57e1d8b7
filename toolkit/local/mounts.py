"""The config's shared file systems on the twin: a local folder stands in for each MountDir.

A MountDir that does not exist is created (when this user may create it) and marked with a
file naming the twins that use it; ``down --purge`` removes it once no twin uses it. A path
that already exists and is not a stand-in (a real mount, ``/home``) is used as it is.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

from toolkit.fsutil import atomic_write_text

MARKER = ".pctk-twin-standin"


def _users(folder: Path) -> list[str]:
    try:
        return [ln for ln in (folder / MARKER).read_text().splitlines() if ln.strip()]
    except OSError:
        return []


def _write_users(folder: Path, users: list[str]) -> None:
    atomic_write_text(folder / MARKER, "".join(f"{u}\n" for u in users), 0o644)


def prepare(paths: list[str], owner: Path) -> list[dict[str, Any]]:
    """Make each MountDir usable; returns one record per path: path, kind, note.

    kind: ``standin`` (a local folder the twin created), ``existing`` (used as it is) or
    ``missing`` (could not be created).
    """
    out: list[dict[str, Any]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and (path / MARKER).exists():
            users = _users(path)
            if str(owner) not in users:
                _write_users(path, [*users, str(owner)])
            out.append({"path": raw, "kind": "standin",
                        "note": "local folder standing in for the shared file system"})
        elif path.exists():
            out.append({"path": raw, "kind": "existing",
                        "note": "exists on this machine: used as it is"})
        else:
            out.append(_create(path, owner))
    return out


def _create(path: Path, owner: Path) -> dict[str, Any]:
    try:
        path.mkdir(parents=True, mode=0o755)
        _write_users(path, [str(owner)])
    except OSError as exc:
        return {"path": str(path), "kind": "missing",
                "note": f"cannot create it ({exc.strerror or exc}); jobs using it fail"}
    return {"path": str(path), "kind": "standin",
            "note": "local folder standing in for the shared file system"}


def release(records: list[dict[str, Any]], owner: Path) -> list[str]:
    """Forget ``owner`` in each stand-in; delete the folders no twin uses any more."""
    removed: list[str] = []
    for rec in records:
        path = Path(str(rec.get("path", "")))
        if rec.get("kind") != "standin" or not (path / MARKER).exists():
            continue
        users = [u for u in _users(path) if u != str(owner)]
        if users:
            _write_users(path, users)
            continue
        with contextlib.suppress(OSError):
            shutil.rmtree(path)
            removed.append(str(path))
    return removed
