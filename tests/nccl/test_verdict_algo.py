"""The busbw verdict uses the catalog figure for the NCCL algorithm that ran."""

from __future__ import annotations

import pytest

from tests.nccl.test_verdict import make_run
from toolkit.bench.comm.verdict import judge, lookup_expectation


@pytest.mark.parametrize(("algo", "busbw", "status"), [
    ("Ring", 366.0, "PASS"),   # healthy single p5 node without NVLS
    ("NVLS", 366.0, "WARN"),   # NVLS ran and gave only Ring speed: 76% of 480
    ("NVLS", 470.0, "PASS"),
    (None, 366.0, "PASS"),     # algorithm unknown: judged by the most lenient figure
    ("Ring", 250.0, "FAIL"),
])
def test_single_node_p5_judged_by_its_algorithm(algo: str | None, busbw: float,
                                                status: str) -> None:
    exp = lookup_expectation("p5.48xlarge", 1, "all_reduce", 4 << 30, algorithm=algo)
    assert exp is not None and exp.algo == (algo or "Ring")
    v = judge(make_run(busbw, hosts=1), exp, nodes=1)
    assert v.status == status, v.reasons
    if algo is None:
        assert any("algorithm unknown" in r for r in v.reasons)


def test_an_algorithm_without_a_figure_gets_no_bandwidth_verdict() -> None:
    assert lookup_expectation("p5.48xlarge", 1, "all_reduce", 4 << 30, algorithm="Tree") is None
