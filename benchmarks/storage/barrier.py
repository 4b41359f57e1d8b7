"""A barrier across nodes through a shared folder: each node leaves a marker file named
after itself, then waits until every node's marker is there.

It needs nothing but the file system under test, which all nodes share by definition (the
share check uses the same mechanism with a short timeout and refuses the target if it
fails). Release skew between nodes is one poll interval.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

POLL_S = 0.01


class BarrierTimeout(RuntimeError):
    pass


def arrive(folder: Path, node: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / node).touch()


def count(folder: Path) -> int:
    try:
        return len(os.listdir(folder))
    except FileNotFoundError:  # the last node removed the run folder: everyone had arrived
        return -1


def wait(folder: Path, node: str, nodes: int, timeout_s: float) -> None:
    """Arrive and block until ``nodes`` markers are present; BarrierTimeout after timeout_s."""
    arrive(folder, node)
    deadline = time.monotonic() + timeout_s
    while True:
        seen = count(folder)
        if seen < 0 or seen >= nodes:
            return
        if time.monotonic() > deadline:
            raise BarrierTimeout(f"{seen} of {nodes} nodes reached {folder.name} within "
                                 f"{timeout_s:g} s")
        time.sleep(POLL_S)
