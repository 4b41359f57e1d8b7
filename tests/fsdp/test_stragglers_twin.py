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
    # the record's verdict: the update's judgement, or WARN where the node's compute stands
    # out (a suspect, which diagnose names; test below)
    assert rec["verdict"]["status"] in ("WARN", s["verdict"])
    assert "cpu-dy-c5-3" in rec["verdict"]["reasons"][0] and "cpu-dy-c5-3" in output
    assert [r["node"] for r in s["per_rank"]] == [f"cpu-dy-c5-{i}" for i in range(1, 5)]


def test_diagnose_names_the_throttled_node_of_a_plain_run(throttled, tmp_path: Path) -> None:
    """The run as a user starts it: no probe matmuls, so the optimizer update is too short to
    show the quota and the end-of-step judgement says OK; the throttled node's rank computes
    many times longer than the others (159.9 ms against 9.1-13.4 ms when this was found),
    and `pctk diagnose` once said "twin-shared-cpu: no node's CPU stands out"."""
    import subprocess
    import sys

    # no checkpoint during the timed steps, as in the run where this was found: with a save
    # every 5 steps of a tiny model the saves are most of each step, and the throttled node's
    # slow saves are read as storage (the rule that tells a slow node's saves from a slow
    # disk's is open work)
    script = train_script(tmp_path, 10).replace("--ckpt-every 5", "--ckpt-every 0")
    state, output = throttled.run(script, *NODES, "--nodelist=cpu-dy-c5-[1-4]", timeout=600)
    assert state == "COMPLETED", output
    path = tmp_path / "record.json"
    rec = json.loads(path.read_text())
    per_rank = rec["metrics"]["breakdown"]["per_rank"]
    assert rec["verdict"]["status"] == "WARN", (rec["verdict"], per_rank)
    assert "cpu-dy-c5-3" in rec["verdict"]["reasons"][0]
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "diagnose", str(path), "--db",
                        str(tmp_path / "r.db")], capture_output=True, text=True, timeout=120,
                       env=throttled.env)
    assert r.returncode in (0, 1), r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("bottleneck: straggler (cpu-dy-c5-3)"), (r.stdout, per_rank)
