"""Benchmark: how often `pctk health slow-nodes`' judging names one moderately slow node, on
simulated figures of a busy host (no Slurm: ``run_sweep`` with a measure function).

Each trial slows one random node by FACTOR (its pairs run at 1/FACTOR) or none; every call
of the measure function (one round's pairs, run at once) meets a load factor drawn from
[1 - BUSY, 1] shared by its pairs, and each pair its own +-NOISE. Prints, per node count and
factor: the slow node named alone, healthy nodes blamed, the most rounds. The real sweep on
twins: tests/perf/slow_nodes.py.

    .venv/bin/python tests/perf/slow_nodes_sim.py [--trials 300] [--threshold 0.5]
"""

from __future__ import annotations

import argparse
import random

from toolkit.health.slownodes import PairResult, run_sweep


def trials(n: int, factor: float, *, noise: float, busy: float, threshold: float, count: int,
           seed: int) -> tuple[float, float, int]:
    rng = random.Random(seed)
    caught = blamed = healthy = rounds = 0
    for _ in range(count):
        nodes = [f"n{i:02d}" for i in range(1, n + 1)]
        speed = dict.fromkeys(nodes, 1.0)
        slow = rng.choice(nodes) if factor > 1 else None
        if slow:
            speed[slow] = 1 / factor

        def measure(rnd: int, pairs: list[tuple[str, str]],
                    speed: dict[str, float] = speed) -> list[PairResult]:
            load = rng.uniform(1 - busy, 1.0)
            return [PairResult(rnd, (a, b), min(speed[a], speed[b]) * load *
                               rng.uniform(1 - noise, 1 + noise)) for a, b in pairs]

        result = run_sweep(nodes, measure, threshold=threshold)
        caught += slow is not None and result.blamed == [slow]
        blamed += len([b for b in result.blamed if b != slow])
        healthy += n - (slow is not None)
        rounds = max(rounds, result.rounds)
    return caught / count, blamed / healthy, rounds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=300)
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--noise", type=float, default=0.15)
    p.add_argument("--busy", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    print(f"threshold {a.threshold}, +-{a.noise:.0%} a pair, load {1 - a.busy:g}-1 a round, "
          f"{a.trials} trials each")
    print(f"{'nodes':>5} {'slow by':>8} {'named':>7} {'healthy blamed':>15} {'rounds':>6}")
    for n in (4, 8, 16):
        for factor in (1.0, 2.0, 2.5, 3.0):
            named, blamed, rounds = trials(n, factor, noise=a.noise, busy=a.busy,
                                           threshold=a.threshold, count=a.trials, seed=a.seed)
            shown = "-" if factor == 1 else f"{named:.0%}"
            print(f"{n:>5} {'none' if factor == 1 else f'{factor:g}x':>8} {shown:>7} "
                  f"{blamed:>15.2%} {rounds:>6}")


if __name__ == "__main__":
    main()
