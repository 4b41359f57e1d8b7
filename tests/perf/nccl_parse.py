"""Benchmark: CPU seconds of ``pctk bench nccl parse`` on a small real log (target < 1 s).

Runs the installed console script on a real published log (4 KB, fixture 09) several times
and prints the median CPU time (user + sys of the child) and wall time, plus whether the
command imported torch. Also prints the CPU time of ``import toolkit.cli`` alone, the part
of the figure spent before parsing starts.

    .venv/bin/python tests/perf/nccl_parse.py [--rounds 5] [--log PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "nccl" / "fixtures"
DEFAULT_LOG = FIXTURES / "09_nccl-tests-287-allreduce-1gpu-5090-avg0.log"
PCTK = Path(sys.executable).parent / "pctk"
PROBE = ("import sys; sys.argv = ['pctk', 'bench', 'nccl', 'parse', sys.argv[1], '--json']\n"
         "from toolkit.cli import main\n"
         "try:\n    main()\nexcept SystemExit:\n    pass\n"
         "print('torch imported:', 'torch' in sys.modules, file=sys.stderr)")


def child_cpu(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    before = os.times()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system -
                                                          before.children_system)
    return cpu, wall, done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--log", type=Path, default=DEFAULT_LOG)
    args = ap.parse_args()
    cpus, walls = [], []
    for _ in range(args.rounds):
        cpu, wall, done = child_cpu([str(PCTK), "bench", "nccl", "parse", str(args.log),
                                     "--json"])
        if done.returncode not in (0, 1):
            print(done.stderr, file=sys.stderr)
            return 2
        cpus.append(cpu)
        walls.append(wall)
    imports = [child_cpu([sys.executable, "-c", "import toolkit.cli"])[0]
               for _ in range(args.rounds)]
    probe = child_cpu([sys.executable, "-c", PROBE, str(args.log)])[2]
    print(f"log: {args.log.name} ({args.log.stat().st_size} bytes)")
    print(f"pctk bench nccl parse: median CPU {statistics.median(cpus):.2f} s, "
          f"median wall {statistics.median(walls):.2f} s over {args.rounds} runs")
    print(f"import toolkit.cli alone: median CPU {statistics.median(imports):.2f} s")
    print(probe.stderr.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
