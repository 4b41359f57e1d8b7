"""Which rank holds the others back: per-rank step timings and a straggler verdict.

In synchronous training every rank's step takes as long as the slowest rank's, so step
times alone name no one. What differs is where the time goes. Each step is split at two
points that are the same on every rank:

- ``local_s``: the optimizer update (AdamW on this rank's shards, then the scheduler): pure
  computation, no communication, so a rank with a slow CPU or GPU takes longer here. A
  small model's update is too short to show it (1 ms for ``tiny`` on a CPU); then
  ``--probe-matmuls N`` adds N fixed 256x256 matmuls to this part of every step (about
  0.25 ms each on one CPU core; the step and throughput figures include them);
- ``sync_wait_s``: the end-of-step all-reduce of the loss, where the ranks that finished
  early wait for the last one. The straggler waits least.

The figures kept per rank are medians over the timed steps (after the warm-up). The
straggler is the rank with the longest ``local_s``; ``local_vs_median`` is that time over
the median rank's, and ``lateness_s`` how much less it waited at the sync than the median
rank (the time the others lost to it each step). Verdict: WARN from ``WARN_RATIO`` x the
median local time, FAIL from ``FAIL_RATIO`` x, and in both cases only if the lateness is at
least ``MIN_LATENESS`` of the median step (a rank that is slow where it costs nothing is
not a straggler). A slow *link* delays every rank's collectives alike and is not named here:
``pctk health slow-nodes`` measures links pair by pair.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.robust import Outlier, worst_outlier

WARN_RATIO = 1.5
FAIL_RATIO = 3.0
MIN_LATENESS = 0.10  # of the median step time
# a node whose compute takes this many times the other nodes' median holds every step back:
# FSDP's collectives wait for it inside forward and backward, where the end-of-step lateness
# above does not see it
COMPUTE_OUTLIER = 2.0
WAIT_SHARE = 0.5  # of a compute straggler's gap the others must be seen waiting (confirmation)
# nodes a compute straggler is judged among: against one other node a busy host's noise was
# taken for a straggler (a healthy 2-node run on the twin)
MIN_NODES = 3


def compute_probe(x: Any, n: int) -> None:
    """``n`` matmuls of a fixed square matrix: the same work on every rank."""
    for _ in range(n):
        x @ x


class RankTimer:
    """This rank's split of each timed step."""

    def __init__(self) -> None:
        self.step_s: list[float] = []
        self.local_s: list[float] = []
        self.sync_wait_s: list[float] = []

    def record(self, step_s: float, local_s: float, sync_wait_s: float) -> None:
        self.step_s.append(step_s)
        self.local_s.append(local_s)
        self.sync_wait_s.append(sync_wait_s)

    def medians(self) -> list[float]:
        if not self.step_s:
            return [0.0, 0.0, 0.0]
        return [statistics.median(x) for x in (self.step_s, self.local_s, self.sync_wait_s)]


def judge(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """The straggler summary from every rank's medians (``rank``, ``node``, ``step_s``,
    ``local_s``, ``sync_wait_s``)."""
    out: dict[str, Any] = {
        "per_rank": per_rank,
        "thresholds": {"warn_local_vs_median": WARN_RATIO, "fail_local_vs_median": FAIL_RATIO,
                       "min_lateness_of_step": MIN_LATENESS},
        "measured": "local_s: optimizer update (no communication); sync_wait_s: end-of-step "
                    "loss all-reduce; medians over the timed steps",
    }
    if len(per_rank) < 2 or not any(r["step_s"] for r in per_rank):
        return {**out, "verdict": "SKIP", "reason": "fewer than 2 ranks or no timed step"}
    slowest = max(per_rank, key=lambda r: r["local_s"])
    med_local = statistics.median(r["local_s"] for r in per_rank)
    med_wait = statistics.median(r["sync_wait_s"] for r in per_rank)
    med_step = statistics.median(r["step_s"] for r in per_rank)
    ratio = slowest["local_s"] / med_local if med_local > 0 else None
    lateness = med_wait - slowest["sync_wait_s"]
    costly = med_step > 0 and lateness >= MIN_LATENESS * med_step
    verdict = "OK"
    if ratio is not None and costly:
        verdict = "FAIL" if ratio >= FAIL_RATIO else "WARN" if ratio >= WARN_RATIO else "OK"
    return {
        **out,
        "slowest_rank": slowest["rank"],
        "slowest_node": slowest["node"],
        "local_s": slowest["local_s"],
        "median_local_s": med_local,
        "local_vs_median": ratio,
        "lateness_s": lateness,
        "lateness_of_step": lateness / med_step if med_step > 0 else None,
        "verdict": verdict,
    }


def describe(s: dict[str, Any]) -> str:
    """One line for logs and reports."""
    if s.get("verdict") == "SKIP":
        return f"stragglers: not judged ({s.get('reason')})"
    ratio = s.get("local_vs_median")
    if ratio is None:
        return f"stragglers: {s['verdict']}"
    # the others' wait; negative (the slowest rank waited longer than the median) is none
    wait_ms = round(s["lateness_s"] * 1000, 1)
    waits = (f"the others wait {wait_ms:.1f} ms for it per step "
             f"({max(s.get('lateness_of_step') or 0.0, 0.0):.0%} of the step)"
             if wait_ms > 0 else "the others do not wait for it")
    return (f"slowest rank {s['slowest_rank']} on {s['slowest_node']}: update "
            f"{s['local_s'] * 1000:.1f} ms, {ratio:.2f}x the median rank; {waits}: "
            f"{s['verdict']} (WARN from {WARN_RATIO}x, FAIL from {FAIL_RATIO}x, if >= "
            f"{MIN_LATENESS:.0%} of the step)")


def compute_straggler(breakdown: dict[str, Any]) -> tuple[Outlier, int] | None:
    """(the node whose compute stands out, its slowest rank), or None, from a record's
    step-time breakdown. Each node's figure is its slowest rank's ``compute`` (forward and
    backward without communication, measured in the same phase on every rank, so a host's
    shared CPUs slow all ranks alike and a throttled node still stands out); an outlier is
    :data:`COMPUTE_OUTLIER` x the median of the other nodes' and beyond their spread
    (:func:`benchmarks.robust.worst_outlier`), confirmed by the others' waiting in training
    (:func:`_others_waited`)."""
    rows = [r for r in breakdown.get("per_rank") or [] if isinstance(r.get("node"), str)]
    per_node: dict[str, float] = {}
    rank_of: dict[str, int] = {}
    for r in rows:
        value, node = r.get("compute"), r["node"]
        if isinstance(value, int | float) and value > per_node.get(node, 0.0):
            per_node[node], rank_of[node] = float(value), int(r.get("rank", -1))
    if len(per_node) < MIN_NODES:
        return None  # two nodes on a shared host: which one is off cannot be told
    found = worst_outlier(per_node, higher_is_worse=True, min_ratio=COMPUTE_OUTLIER)
    if found is None or not _others_waited(rows, found):
        return None
    return found, rank_of[found.key]


def _others_waited(rows: list[dict[str, Any]], found: Outlier) -> bool:
    """The second signal a straggler leaves: in training, the other nodes' ranks wait for it
    inside the collectives (their exposed communication) for at least :data:`WAIT_SHARE` of
    its compute gap more than its own ranks do. ``compute`` is measured in a phase of its
    own after training; on a busy host one rank can be starved there alone, and without
    this confirmation such a healthy run was failed."""
    def waits(on_node: bool) -> list[float]:
        return [float(r["exposed_comm"]) for r in rows if (r["node"] == found.key) == on_node
                and isinstance(r.get("exposed_comm"), int | float)]

    mine, theirs = waits(True), waits(False)
    if not mine or not theirs:
        return False
    gap = found.value - found.reference
    return statistics.median(theirs) - statistics.median(mine) >= WAIT_SHARE * gap


def describe_compute(found: tuple[Outlier, int]) -> str:
    """One line for a compute straggler."""
    out, rank = found
    return (f"rank {rank} on {out.key}: compute {out.value * 1000:.1f} ms a step, "
            f"{out.ratio:.1f}x the other nodes' median ({out.reference * 1000:.1f} ms): "
            f"a straggler, if its node is to blame (WARN from {COMPUTE_OUTLIER}x, with the "
            "others seen waiting for it; `pctk diagnose` weighs link and storage too)")
