"""Benchmark: a 1,000-task array on the twin, pctk's ClusterExecutor against plain submitit.

Both submit the same function with ``map_array`` to the same partition and wait for every
result; the figure is pctk's wall time over submitit's, measured in one run (target <= 1.10).
The order alternates over rounds so the machine's drift does not favour one side.

    .venv/bin/python tests/perf/submit_overhead.py [--tasks 1000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import submitit

from toolkit.local.twin import Twin
from toolkit.submit import ClusterExecutor


def square(x: int) -> int:
    return x * x


def run_plain(folder: Path, n: int, partition: str) -> float:
    ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
    ex.update_parameters(slurm_partition=partition, timeout_min=30)
    t0 = time.perf_counter()
    jobs = ex.map_array(square, range(n))
    assert [j.result() for j in jobs] == [i * i for i in range(n)]
    return time.perf_counter() - t0


def run_pctk(folder: Path, n: int, partition: str) -> float:
    ex = ClusterExecutor(folder, queue=partition, timeout_min=30)
    t0 = time.perf_counter()
    jobs = ex.map_array(square, range(n))
    assert [j.result() for j in jobs] == [i * i for i in range(n)]
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--nodes", type=int, default=4, help="cpu nodes of the twin")
    args = ap.parse_args()
    import os

    import cloudpickle

    cloudpickle.register_pickle_by_value(__import__(__name__))
    state = Path(tempfile.mkdtemp(prefix="pctk-perf-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="pctk-perf-jobs-", dir="/tmp"))
    twin = Twin(state)
    twin.up(Path(__file__).resolve().parents[2] / "cluster-configs" / "p5-training.yaml",
            nodes=args.nodes)
    os.environ.update(twin.env())
    plain: list[float] = []
    pctk: list[float] = []
    try:
        for r in range(args.rounds):
            order = [("plain", run_plain), ("pctk", run_pctk)]
            if r % 2:
                order.reverse()
            for name, fn in order:
                took = fn(work / f"{name}-{r}", args.tasks, "cpu")
                (plain if name == "plain" else pctk).append(took)
                print(f"round {r} {name:5s} {args.tasks} tasks: {took:7.1f} s", flush=True)
    finally:
        twin.down(purge=True)
    ratio = sum(pctk) / sum(plain)
    verdict = "met" if ratio <= 1.10 else "NOT met"
    print(f"plain submitit: {sum(plain):.1f} s, pctk: {sum(pctk):.1f} s, "
          f"ratio pctk/submitit = {ratio:.3f} (target <= 1.10: {verdict})")


if __name__ == "__main__":
    main()
