"""Benchmark: `pctk health slow-nodes` on 4, 8 and 16 twin nodes, one made slow by tc.

Prints, per size: rounds (and the most the sweep allows, 1 + ceil(log2 N)), pair tests run,
wall time, which node was named. Each size gets a twin of its own (a copy of the
p5-training preset whose cpu queue has N nodes, no accounting); the last node's link is
shaped to --rate, so the slow node is at the end of the pairing. With --clean-runs K, the
sweep also runs K times without a fault and reports the nodes blamed (false alarms).

    .venv/bin/python tests/perf/slow_nodes.py [--sizes 4,8,16] [--clean-runs 1]
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

import yaml

from toolkit.health.slownodes import PairTest, SlurmPairs, SweepResult, run_sweep
from toolkit.local import faults
from toolkit.local.twin import Twin

PRESET = Path(__file__).resolve().parents[2] / "cluster-configs" / "p5-training.yaml"


def config_with(n: int, folder: Path) -> Path:
    cfg = yaml.safe_load(PRESET.read_text())
    cfg["Scheduling"]["SlurmQueues"] = [q for q in cfg["Scheduling"]["SlurmQueues"]
                                        if q["Name"] == "cpu"]
    cfg["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["MaxCount"] = n
    path = folder / f"slow-perf-{n}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def sweep(nodes: list[str], work: Path, size: str) -> tuple[SweepResult, int]:
    runner = SlurmPairs(test=PairTest(size=size, iters=10), workdir=work, partition="cpu",
                        timeout=600)
    result = run_sweep(nodes, runner)
    return result, len(runner.job_ids)


def wait_idle(twin: Twin, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = twin.status().nodes
        if len(nodes) == n and all(x["state"] == "idle" for x in nodes):
            return
        time.sleep(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,8,16")
    ap.add_argument("--rate", default="50mbit")
    ap.add_argument("--size", default="4M", help="message size of each pair test")
    ap.add_argument("--clean-runs", type=int, default=0)
    args = ap.parse_args()
    print(f"{'nodes':>5} {'rounds':>6} {'max':>4} {'tests':>5} {'wall_s':>7}  named")
    for n in (int(x) for x in args.sizes.split(",")):
        folder = Path(tempfile.mkdtemp(prefix="pctk-slowperf-", dir="/tmp"))
        twin = Twin(folder / "t")
        try:
            twin.up(config_with(n, folder), accounting=False)
            os.environ.update(twin.env())
            nodes = [f"cpu-dy-c5-{i}" for i in range(1, n + 1)]
            twin.power_up(nodes, timeout=300)  # dynamic nodes start powered down
            slow = nodes[-1]
            faults.slow_net(twin.state_dir, slow, args.rate)
            t0 = time.perf_counter()
            result, tests = sweep(nodes, folder / "work", args.size)
            wall = time.perf_counter() - t0
            faults.clear(twin.state_dir)
            wait_idle(twin, n)  # the shaped link also delayed slurmctld's pings to the node
            named = ",".join(result.blamed) or "-"
            print(f"{n:5d} {result.rounds:6d} {1 + math.ceil(math.log2(n)):4d} {tests:5d} "
                  f"{wall:7.1f}  {named}{'' if named == slow else f' (slowed: {slow})'}",
                  flush=True)
            for k in range(args.clean_runs):
                t0 = time.perf_counter()
                result, tests = sweep(nodes, folder / f"clean{k}", args.size)
                blamed = result.blamed
                print(f"{n:5d} {result.rounds:6d} {'':4} {tests:5d} "
                      f"{time.perf_counter() - t0:7.1f}  no fault: blamed "
                      f"{','.join(blamed) or 'none'}", flush=True)
        finally:
            faults.clear(twin.state_dir)
            twin.down(purge=True)


if __name__ == "__main__":
    main()
