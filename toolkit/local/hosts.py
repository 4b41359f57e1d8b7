"""The twin's block in ``/etc/hosts``: node names and host names resolve to the nodes' addresses.

MASTER_ADDR taken from a job's node list then works, and each slurmd resolves its own host
name (see :func:`toolkit.local.plan.node_host`). The block is fenced by markers that name
the twin's state folder, so twins never touch each other's lines; it is written before the
slurmd start and removed by ``down``. Not root: the file cannot be written, names do not
resolve, and ``MASTER_ADDR=127.0.0.1`` still works.

Twins in other state folders keep the same ParallelCluster node names (``gpu-st-p5-1``) at
other addresses, and ``/etc/hosts`` answers with the first block that names one. So the
twin also writes its own hosts file, ``etc/hosts`` in its state folder (this host's lines
without any twin's block, then its own), named by ``PCTK_TWIN_HOSTS`` in each slurmd's and
each task's environment; the twin's ``LD_PRELOAD`` library (:mod:`toolkit.local.nodeaddr`)
answers getaddrinfo and gethostbyname* for the names in it, so a twin's jobs resolve their
node names to their own twin's nodes. (A mount namespace with that file over ``/etc/hosts``
would hide every mount made after the slurmd started.)
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from toolkit.local.confsyntax import comment
from toolkit.local.plan import TwinNode

HOSTS_FILE = Path(os.environ.get("PCTK_HOSTS_FILE", "/etc/hosts"))


def _markers(state_dir: Path) -> tuple[str, str]:
    # one line whatever the folder's name (the plan refuses odd names before any block)
    return (f"# BEGIN pctk twin {comment(str(state_dir))}",
            f"# END pctk twin {comment(str(state_dir))}")


def block(state_dir: Path, nodes: Iterable[TwinNode]) -> list[str]:
    """The lines for one twin: nodes sharing 127.0.0.1 eight to a line, then one line per
    node with its own address (address, host name, node name)."""
    begin, end = _markers(state_dir)
    nodes = list(nodes)
    shared = [n.name for n in nodes if n.addr == "127.0.0.1"]
    return [begin] + [
        "127.0.0.1 " + " ".join(shared[i: i + 8]) for i in range(0, len(shared), 8)
    ] + [f"{n.addr} {n.host} {n.name}" for n in nodes if n.addr != "127.0.0.1"] + [end]


def strip_block(state_dir: Path, lines: list[str]) -> list[str]:
    begin, end = _markers(state_dir)
    out, skipping = [], False
    for line in lines:
        if line == begin:
            skipping = True
        elif line == end and skipping:
            skipping = False
        elif not skipping:
            out.append(line)
    return out


def twin_file(state_dir: Path) -> Path:
    """The twin's own hosts file, bind-mounted over /etc/hosts for its slurmd and jobs."""
    return state_dir / "etc" / "hosts"


def without_blocks(lines: list[str]) -> list[str]:
    """This host's own lines: every twin's block left out."""
    out, skipping = [], False
    for line in lines:
        if line.startswith("# BEGIN pctk twin "):
            skipping = True
        elif line.startswith("# END pctk twin ") and skipping:
            skipping = False
        elif not skipping:
            out.append(line)
    return out


def add_block(state_dir: Path, nodes: Iterable[TwinNode]) -> None:
    lines = block(state_dir, nodes)
    try:
        host_lines = HOSTS_FILE.read_text().splitlines()
    except OSError:
        host_lines = ["127.0.0.1 localhost"]
    own = twin_file(state_dir)
    own.parent.mkdir(parents=True, exist_ok=True)
    tmp = own.with_name(own.name + ".tmp")
    tmp.write_text("\n".join(without_blocks(host_lines) + lines) + "\n")
    os.chmod(tmp, 0o644)  # read by every job of the twin, whoever runs it
    tmp.replace(own)
    _edit(lambda old: strip_block(state_dir, old) + lines)


def remove_block(state_dir: Path) -> None:
    _edit(lambda old: strip_block(state_dir, old))


def _edit(change: Callable[[list[str]], list[str]]) -> None:
    try:
        with open(HOSTS_FILE, "r+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            lines = fh.read().splitlines()
            new = change(lines)
            if new != lines:
                # /etc/hosts is often a bind mount: rewrite in place, not by rename
                fh.seek(0)
                fh.write("\n".join(new) + "\n")
                fh.truncate()
    except PermissionError:
        pass  # not root: names do not resolve; MASTER_ADDR=127.0.0.1 still works
    except FileNotFoundError:
        pass
