"""Robust outliers (benchmarks.robust) and the FSDP compute straggler built on them."""

from __future__ import annotations

import pytest

from benchmarks.fsdp.stragglers import compute_straggler
from benchmarks.robust import worst_outlier


def _breakdown(compute_ms: dict[str, list[float]], wait_ms: dict[str, float]) -> dict:
    """Per-rank compute and exposed communication (the time a rank waited in training)."""
    rows, rank = [], 0
    for node, values in compute_ms.items():
        for v in values:
            rows.append({"rank": rank, "node": node, "compute": v / 1000,
                         "exposed_comm": wait_ms[node] / 1000})
            rank += 1
    return {"per_rank": rows}


COMPUTE = {"c5-1": [9.1], "c5-2": [159.9], "c5-3": [13.4], "c5-4": [11.2]}


def test_the_throttled_node_of_the_report_is_named():
    # the figures of the run that was missed: rank 1 at 159.9 ms, the others 9.1-13.4 ms,
    # and in training the others waited for it
    waited = {"c5-1": 140.0, "c5-2": 2.0, "c5-3": 137.0, "c5-4": 139.0}
    found = compute_straggler(_breakdown(COMPUTE, waited))
    assert found is not None
    out, rank = found
    assert (out.key, rank) == ("c5-2", 1)
    assert out.reference == pytest.approx(0.0112) and out.ratio == pytest.approx(159.9 / 11.2)


def test_a_slow_compute_phase_nobody_waited_for_is_no_straggler():
    # the same compute figures, but in training no rank waited for c5-2 (its compute phase
    # was starved on a busy host after training): not confirmed, nobody is named
    waited = {"c5-1": 3.0, "c5-2": 2.0, "c5-3": 4.0, "c5-4": 2.5}
    assert compute_straggler(_breakdown(COMPUTE, waited)) is None


@pytest.mark.parametrize("slow", [2.2, 3.0])
def test_a_moderately_slow_node_among_eight_is_named(slow):
    healthy = [10.0, 10.4, 9.7, 10.9, 11.3, 9.9, 10.2]
    values = {f"n{i}": v for i, v in enumerate(healthy)} | {"bad": 10.3 * slow}
    found = worst_outlier(values, higher_is_worse=True, min_ratio=2.0)
    assert found is not None and found.key == "bad"


@pytest.mark.parametrize("values", [
    {"a": 9.1, "b": 13.4, "c": 11.2, "d": 12.0},  # a healthy spread (1.5x end to end)
    {"a": 10.0, "b": 19.0},  # two nodes under 2x: no verdict from a ratio alone
    {"a": 30.0, "b": 31.0, "c": 29.0, "d": 30.5},  # all alike slow: no one node to blame
])
def test_no_node_is_named_without_a_clear_outlier(values):
    assert worst_outlier(values, higher_is_worse=True, min_ratio=2.0) is None


def test_a_wide_spread_of_peers_needs_a_wider_gap():
    # 2.1x the median, but the peers themselves spread from 5 to 15: not beyond 4 spreads
    values = {"a": 5.0, "b": 15.0, "c": 10.0, "d": 6.0, "e": 14.0, "x": 21.0}
    assert worst_outlier(values, higher_is_worse=True, min_ratio=2.0) is None


def test_lower_is_worse_for_bandwidths():
    values = {"a": 1.4, "b": 1.6, "c": 1.5, "d": 0.5}
    found = worst_outlier(values, higher_is_worse=False, min_ratio=2.5)
    assert found is not None and found.key == "d" and found.ratio == pytest.approx(3.0)
    assert worst_outlier(values, higher_is_worse=False, min_ratio=3.5) is None
