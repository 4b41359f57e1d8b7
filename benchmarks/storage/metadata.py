"""Metadata rates, mdtest-style: create, stat and remove many empty files in one folder.

fio measures data paths; file creation, lookup and removal hit the metadata server, which
is what a data loader opening millions of small files (or a checkpoint writing thousands of
shards) waits on. Each step is timed on its own so the node script can put a barrier
between them and report files per second over the slowest node.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def file_names(folder: Path, count: int) -> list[Path]:
    return [folder / f"m{i:07d}" for i in range(count)]


def create(paths: list[Path]) -> float:
    """Create each file empty (open O_CREAT|O_EXCL, close); seconds taken."""
    start = time.perf_counter()
    for path in paths:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return time.perf_counter() - start


def stat(paths: list[Path]) -> float:
    start = time.perf_counter()
    for path in paths:
        os.stat(path)
    return time.perf_counter() - start


def remove(paths: list[Path]) -> float:
    start = time.perf_counter()
    for path in paths:
        os.unlink(path)
    return time.perf_counter() - start


STEPS = {"create": create, "stat": stat, "remove": remove}
