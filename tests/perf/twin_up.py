"""Benchmark: `pctk local up` to ready (static nodes idle, dynamic ones powered down, sacct
answering), accounting on.

Targets: <= 15 s for the p5 preset at 2 nodes per compute resource (4 nodes); < 20 s for a
config of 64 nodes (`--scale 64`; `--static S` of them static, whose slurmd all start: the
worst case is `--static 64`). Prints the cold start (a new state folder: MariaDB's data folder
is created) and warm starts (the same folder after `down`), each to ready, and `down`'s time.

    .venv/bin/python tests/perf/twin_up.py [--runs 3]
    .venv/bin/python tests/perf/twin_up.py --scale 64 --static 64
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
    ap.add_argument("--scale", type=int, default=0,
                    help="instead of the p5 preset: one queue of this many c5 nodes")
    ap.add_argument("--static", type=int, default=None,
                    help="with --scale: how many of them are static (default: all)")
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="pctk-perf-", dir="/tmp"))
    twin = Twin(state)
    cfg = Path(__file__).resolve().parents[2] / "cluster-configs" / "p5-training.yaml"
    target = 15.0
    if args.scale:
        static = args.scale if args.static is None else args.static
        # a minimal config (no HeadNode, Image, Networking): started with force=True
        cfg = state.parent / f"{state.name}-scale.yaml"
        cfg.write_text(
            "Region: us-east-1\nScheduling:\n  Scheduler: slurm\n"
            "  SlurmSettings: {Database: {Uri: db:3306, UserName: slurm, "
            "PasswordSecretArn: arn:x}}\n"
            "  SlurmQueues:\n    - Name: compute\n      ComputeResources:\n"
            f"        - {{Name: c5, InstanceType: c5.4xlarge, MinCount: {static}, "
            f"MaxCount: {args.scale}}}\n")
        args.nodes = args.scale
        target = 20.0
    try:
        t0 = time.perf_counter()
        st = twin.up(cfg, nodes=args.nodes, force=bool(args.scale))
        cold = time.perf_counter() - t0
        n = len(st.nodes)
        t0 = time.perf_counter()
        twin.down()
        down = time.perf_counter() - t0
        warm = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            twin.up(cfg, nodes=args.nodes, force=bool(args.scale))
            warm.append(time.perf_counter() - t0)
            twin.down()
    finally:
        twin.down(purge=True)
    if args.scale:
        cfg.unlink(missing_ok=True)
        print(f"twin with {n} nodes ({static} static, slurmd started; "
              f"{n - static} dynamic, powered down), accounting on")
    else:
        print(f"twin with {n} nodes ({args.nodes} per compute resource), accounting on")
    print(f"cold up to ready: {cold:6.2f} s   (creates the MariaDB data folder)")
    print(f"warm up to ready: {statistics.median(warm):6.2f} s median of {len(warm)} "
          f"({', '.join(f'{w:.2f}' for w in warm)})")
    print(f"down:             {down:6.2f} s")
    print(f"target <= {target:g} s: {'met' if max(cold, *warm) <= target else 'NOT met'}")


if __name__ == "__main__":
    main()
