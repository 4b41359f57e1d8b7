"""Fault injection helpers for the health tests on the twin (each undoes what it did)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from toolkit.health.inventory import SINFO_FIELDS, parse_sinfo

EFA_DEVICES = 32


def fi_info_with_efa(devices: int = EFA_DEVICES) -> str:
    """A stand-in ``fi_info`` (shell script) that lists ``devices`` EFA devices."""
    blocks = "".join(
        f"provider: efa\n    fabric: efa\n    domain: rdmap{i}s0-rdm\n"
        f"    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n" for i in range(devices))
    return ('if [ "$1" = "--version" ]; then echo "libfabric: 0.0.0-stand-in"; exit 0; fi\n'
            f"cat <<'X'\n{blocks}X\n")


# a stand-in fi_info whose libfabric has no efa provider (what a node with a broken EFA
# driver or a missing EFA installer answers)
FI_INFO_WITHOUT_EFA = (
    'if [ "$1" = "-p" ]; then echo "fi_getinfo: -61 (No data available)" >&2; exit 1; fi\n'
    'if [ "$1" = "--version" ]; then echo "libfabric: 0.0.0-stand-in"; exit 0; fi\n'
    'printf "tcp:\\n    version: 1.0\\nudp:\\n    version: 1.0\\nshm:\\n    version: 1.0\\n"\n')


def write_tool(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text("#!/bin/sh\n# stand-in for tests: not the real tool\n" + body)
    exe.chmod(0o755)
    return exe


def make_read_only(path: Path) -> str:
    """Make ``path`` unwritable even for root; returns how ("ro-bind" or "immutable").

    Root ignores mode bits, so a chmod would prove nothing: a read-only bind mount (EROFS, as
    a file system remounted read-only after errors) or the immutable attribute (EPERM).
    """
    r = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if r.returncode == 0:
        r = subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], capture_output=True)
        if r.returncode == 0:
            return "ro-bind"
        subprocess.run(["umount", str(path)], capture_output=True)
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)]).returncode == 0:
        return "immutable"
    raise RuntimeError(f"cannot make {path} read-only here (no bind mount, no chattr)")


def undo_read_only(path: Path, how: str) -> None:
    if how == "ro-bind":
        subprocess.run(["umount", str(path)], capture_output=True)
    elif how == "immutable":
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def node_table(env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """node -> (StateComplete without +cloud, reason) from sinfo.

    Every twin node is a cloud node, as on ParallelCluster (IDLE+CLOUD): the flag says nothing
    about a node's health, so it is left out here.
    """
    r = subprocess.run(["sinfo", "-N", "-h", "-O", SINFO_FIELDS], capture_output=True,
                       text=True, env=env, check=True)
    return {n.name: ("+".join(f for f in n.state.split("+") if f != "cloud"), n.reason)
            for n in parse_sinfo(r.stdout).values()}


def wait_state(env: dict[str, str], node: str, predicate, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = node_table(env)[node][0]
        if predicate(set(state.split("+"))):
            return state
        time.sleep(1)
    raise AssertionError(f"{node} still {state} after {timeout}s")


def read_record(path: Path) -> dict:
    return json.loads(path.read_text())


def failing(record: dict) -> dict[str, set[str]]:
    """node -> names of the checks that FAIL."""
    return {node: {c for c, body in checks.items() if body["status"] == "FAIL"}
            for node, checks in record["metrics"]["nodes"].items()}
