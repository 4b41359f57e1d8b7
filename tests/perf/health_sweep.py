"""Benchmark (a script, not a test): a quick health sweep of 16 nodes against 1 node.

Starts its own twin with one queue of 16 p5.48xlarge nodes (no accounting), times a quick
sweep of one node and of all sixteen in the same run, prints both and the ratio (target:
16 nodes take at most twice as long as one, since the nodes check themselves in parallel
inside one Slurm job), and stops the twin.

    .venv/bin/python tests/perf/health_sweep.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from toolkit.health.inventory import read_nodes  # noqa: E402
from toolkit.health.sweep import SweepOptions, run_sweep  # noqa: E402
from toolkit.local.twin import Twin  # noqa: E402

CONFIG = """\
Region: us-east-1
Image:
  Os: ubuntu2204
HeadNode:
  InstanceType: m5.8xlarge
  Networking:
    SubnetId: subnet-0123456789abcdef0
  Ssh:
    KeyName: my-key
Scheduling:
  Scheduler: slurm
  SlurmQueues:
    - Name: gpu
      Networking:
        SubnetIds:
          - subnet-0123456789abcdef1
        PlacementGroup:
          Enabled: true
      ComputeResources:
        - Name: p5
          InstanceType: p5.48xlarge
          MinCount: 16
          MaxCount: 16
          Efa:
            Enabled: true
"""


def wait_idle(timeout: float = 60) -> None:
    """Each sweep starts from idle nodes, not from the previous job's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = {n.state for n in read_nodes().values()}
        if states == {"idle"}:
            return
        time.sleep(0.2)
    raise SystemExit(f"nodes not idle after {timeout}s")


def timed_sweep(nodes: str, mnt: Path, work: Path) -> tuple[float, str]:
    wait_idle()
    t0 = time.monotonic()
    result = run_sweep(SweepOptions(nodes=nodes, partition="gpu", level="quick",
                                    mounts=[str(mnt)], workdir=work, timeout_s=300))
    took = time.monotonic() - t0
    if len(result.nodes) != len(result.instance_types) or result.unchecked:
        raise SystemExit(f"sweep of {nodes} left nodes unchecked: {result.unchecked}")
    return took, result.verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5, help="sweeps per size (median reported)")
    args = ap.parse_args()
    state = Path(tempfile.mkdtemp(prefix="pctk-hp-", dir="/tmp"))
    cfg = state / "health-16.yaml"
    cfg.write_text(CONFIG)
    twin = Twin(state / "twin")
    try:
        t0 = time.monotonic()
        twin.up(str(cfg), nodes=16, accounting=False)
        print(f"twin with 16 nodes up in {time.monotonic() - t0:.1f}s")
        os.environ.update(twin.env())
        mnt = state / "mnt"
        mnt.mkdir()
        times: dict[int, list[float]] = {1: [], 16: []}
        for _ in range(args.repeat):
            for n, nodes in ((1, "gpu-st-p5-1"), (16, "gpu-st-p5-[1-16]")):
                took, verdict = timed_sweep(nodes, mnt, state / "runs")
                times[n].append(took)
                print(f"  {n:2d} node(s): {took:.2f}s ({verdict})")
        one, sixteen = statistics.median(times[1]), statistics.median(times[16])
        print(f"quick sweep, median of {args.repeat}: 1 node {one:.2f}s, 16 nodes "
              f"{sixteen:.2f}s, ratio {sixteen / one:.2f}x (target <= 2x)")
        return 0 if sixteen <= 2 * one else 1
    finally:
        twin.down(purge=True)


if __name__ == "__main__":
    sys.exit(main())
