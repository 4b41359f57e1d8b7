"""FSDP on 4 twin nodes, one node's CPU throttled (a real cgroup quota): the record names it.

The benchmark is not told which node is slow; it finds the rank whose optimizer update
(plus 200 fixed matmuls, ``--probe-matmuls``: the tiny model's own update is too short to
show a CPU quota) takes longest and that the others wait for at the end of each step. The
fault is cleared by the fixture even when the test fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fsdp.test_twin import NODES, train_script
from tests.twinutil import TwinHandle
from toolkit.local import faults

pytestmark = pytest.mark.twin


@pytest.fixture
def throttled(twin: TwinHandle) -> Iterator[TwinHandle]:
    faults.slow_cpu(twin.state_dir, "cpu-dy-c5-3", 0.1)
    try:
        yield twin
    finally:
        faults.clear(twin.state_dir)


def test_fsdp_names_the_throttled_node_as_the_straggler(throttled, tmp_path: Path) -> None:
    # 200 probe matmuls (about 50 ms of one core a step): far past the quota's 10 ms per
    # 100 ms period, so the throttle always bites (20, about 5 ms, could fit in one period's
    # quota). 0.1 CPU: the throttled rank's update is about 7x the median here (0.05 made it
    # more so, but its start-up took 20x: 150 s a run, 55 s now)
    script = train_script(tmp_path, 10).replace("--out ", "--probe-matmuls 200 --out ")
    state, output = throttled.run(script, *NODES,
                                  "--nodelist=cpu-dy-c5-[1-4]", timeout=600)
    assert state == "COMPLETED", output
    rec = json.loads((tmp_path / "record.json").read_text())
    s = rec["metrics"]["stragglers"]
    assert s["slowest_node"] == "cpu-dy-c5-3", s["per_rank"]
    assert s["verdict"] in ("WARN", "FAIL") and s["local_vs_median"] >= 1.5
    assert rec["verdict"]["status"] == s["verdict"]
    assert "slowest rank" in rec["verdict"]["reasons"][0] and "cpu-dy-c5-3" in output
    assert [r["node"] for r in s["per_rank"]] == [f"cpu-dy-c5-{i}" for i in range(1, 5)]
