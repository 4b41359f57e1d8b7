"""Benchmark: wall and CPU time of ``pctk --version`` and ``pctk --help`` (target < 0.3 s wall).

Runs the console script next to this interpreter (``.venv/bin/pctk``) several times per
command and prints the median wall time and the median CPU time (user + system of the child),
so a loaded machine shows up as wall above CPU rather than as a slower pctk.

    .venv/bin/python tests/perf/cli_startup.py [--runs 9] [--pctk PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (["--version"], ["--help"])
TARGET_WALL_S = 0.3


def child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_once(argv: list[str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run; the command must exit 0."""
    cpu0, t0 = child_cpu_s(), time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0, child_cpu_s() - cpu0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--pctk", type=Path, default=Path(sys.executable).parent / "pctk")
    args = ap.parse_args()
    if not os.access(args.pctk, os.X_OK):
        print(f"cli_startup: no pctk at {args.pctk}; pass --pctk", file=sys.stderr)
        return 2
    slow = False
    for extra in COMMANDS:
        argv = [str(args.pctk), *extra]
        time_once(argv)  # warm the page cache and .pyc files
        runs = [time_once(argv) for _ in range(args.runs)]
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        slow |= wall >= TARGET_WALL_S
        print(f"pctk {' '.join(extra):<10} median of {args.runs}: wall {wall:.3f} s, "
              f"cpu {cpu:.3f} s (target wall < {TARGET_WALL_S} s)")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
