"""Benchmark: `pctk local up` to ready (every node idle, sacct answering), 4 nodes, accounting on.

Target: <= 15 s. Prints the cold start (a new state folder: MariaDB's data folder is created)
and warm starts (the same folder after `down`), each to ready, and the time `down` takes.

    .venv/bin/python tests/perf/twin_up.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from toolkit.local.twin import Twin


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="warm starts to time")
    ap.add_argument("--nodes", type=int, default=2,
                    help="per compute resource; the p5 preset has two, so 2 gives 4 nodes")
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="pctk-perf-", dir="/tmp"))
    twin = Twin(state)
    cfg = Path(__file__).resolve().parents[2] / "cluster-configs" / "p5-training.yaml"
    try:
        t0 = time.perf_counter()
        st = twin.up(cfg, nodes=args.nodes)
        cold = time.perf_counter() - t0
        n = len(st.nodes)
        t0 = time.perf_counter()
        twin.down()
        down = time.perf_counter() - t0
        warm = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            twin.up(cfg, nodes=args.nodes)
            warm.append(time.perf_counter() - t0)
            twin.down()
    finally:
        twin.down(purge=True)
    print(f"twin with {n} nodes ({args.nodes} per compute resource), accounting on")
    print(f"cold up to ready: {cold:6.2f} s   (creates the MariaDB data folder)")
    print(f"warm up to ready: {statistics.median(warm):6.2f} s median of {len(warm)} "
          f"({', '.join(f'{w:.2f}' for w in warm)})")
    print(f"down:             {down:6.2f} s")
    print(f"target <= 15 s: {'met' if max(cold, *warm) <= 15 else 'NOT met'}")


if __name__ == "__main__":
    main()
