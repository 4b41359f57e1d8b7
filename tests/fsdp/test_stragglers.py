"""The straggler verdict from per-rank medians (benchmarks/fsdp/stragglers.py)."""

from __future__ import annotations

from benchmarks.fsdp.stragglers import describe, judge


def _rank(r: int, local: float, wait: float, step: float = 0.2) -> dict:
    return {"rank": r, "node": f"n{r}", "step_s": step, "local_s": local, "sync_wait_s": wait}


def test_even_ranks_are_ok():
    s = judge([_rank(r, 0.010 + 0.001 * r, 0.005) for r in range(4)])
    assert s["verdict"] == "OK"


def test_a_rank_slow_where_it_costs_the_others_fails():
    ranks = [_rank(r, 0.010, 0.050) for r in range(4)]
    ranks[2] = _rank(2, 0.060, 0.001)  # 6x the update; the others wait 49 ms of 200
    s = judge(ranks)
    assert (s["slowest_rank"], s["slowest_node"], s["verdict"]) == (2, "n2", "FAIL")
    assert s["local_vs_median"] == 6.0 and abs(s["lateness_s"] - 0.049) < 1e-9
    assert "slowest rank 2 on n2" in describe(s) and "FAIL" in describe(s)


def test_warn_between_the_thresholds_and_ok_when_nobody_waits():
    ranks = [_rank(r, 0.010, 0.030) for r in range(4)]
    ranks[0] = _rank(0, 0.020, 0.005)
    assert judge(ranks)["verdict"] == "WARN"
    ranks[0] = _rank(0, 0.020, 0.029)  # slower, but the others lose 1 ms of 200: not costly
    assert judge(ranks)["verdict"] == "OK"


def test_one_rank_is_not_judged():
    assert judge([_rank(0, 0.01, 0.0)])["verdict"] == "SKIP"


def test_no_negative_wait_when_the_slowest_rank_waits_longest():
    """It printed "wait -0.0 ms (-0% of the step)" when the slowest rank also waited a
    little longer than the median rank at the end-of-step all-reduce."""
    ranks = [_rank(r, 0.010, 0.005) for r in range(4)]
    ranks[1] = _rank(1, 0.011, 0.00502)
    line = describe(judge(ranks))
    assert "-0" not in line and "the others do not wait for it" in line
    ranks[1] = _rank(1, 0.060, 0.001)
    assert "the others wait 4.0 ms for it per step (2% of the step)" in describe(judge(ranks))
