"""`pctk health slow-nodes` on a twin of 8 CPU nodes, one made slow by a real mechanism.

Each test slows one node (tc on its address, or a cgroup cpu quota on its slurmd and jobs),
runs the sweep through the installed console script on real Slurm jobs (torch collectives
over gloo between two nodes), and checks that exactly that node is named and drained. The
benchmarks are not told which node is slow. Faults and drains are undone by the fixture,
also when a test fails. Sized for a 2-core machine: 4 MiB all_reduce, 10 iterations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import session_config
from toolkit.health.slownodes import PairTest, SlurmPairs
from toolkit.local import faults
from toolkit.local.twin import Twin

PCTK = str(Path(sys.executable).parent / "pctk")
NODES = [f"cpu-dy-c5-{i}" for i in range(1, 9)]


@pytest.fixture(scope="module")
def twin8() -> Iterator[tuple[Twin, dict[str, str]]]:
    state = Path(tempfile.mkdtemp(prefix="pctk-slow-", dir="/tmp"))
    t = Twin(state)
    try:
        # dynamic nodes start powered down: power the 8 up once and keep them up (a long
        # ScaledownIdletime), so each sweep measures links, not boots
        t.up(session_config(Path(tempfile.mkdtemp(prefix="pctk-slowcfg-", dir="/tmp"))),
             nodes=8, accounting=False)
        t.power_up(NODES, timeout=180)
        yield t, {**os.environ, **t.env()}
    finally:
        t.down(purge=True)


@pytest.fixture
def slow_twin(twin8, tmp_path) -> Iterator[tuple[Twin, dict[str, str], Path]]:
    """The module's twin; faults cleared and nodes resumed after each test, pass or fail."""
    t, env = twin8
    try:
        yield t, env, tmp_path
    finally:
        faults.clear(t.state_dir)
        for n in NODES:
            subprocess.run(["scontrol", "update", f"NodeName={n}", "State=RESUME"], env=env,
                           capture_output=True)
        _wait_all_idle(env)


def _wait_all_idle(env: dict[str, str], timeout: float = 120) -> None:
    """A shaped link also delays slurmctld's pings: the node may be left not_responding
    for a while after the fault is cleared (as a real node with a congested link)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["sinfo", "-h", "-N", "-p", "cpu", "-o", "%T"], env=env,
                             capture_output=True, text=True).stdout.split()
        if out and all(st == "idle" for st in out):
            return
        time.sleep(1)


def _sweep(env: dict[str, str], work: Path, *extra: str) -> tuple[int, dict]:
    r = subprocess.run([PCTK, "health", "slow-nodes", "--partition", "cpu", "--size", "4M",
                        "--iters", "10", "--timeout", "400", "--workdir", str(work), "--json",
                        *extra], capture_output=True, text=True, env=env, timeout=1500)
    assert r.stdout.strip(), r.stderr
    return r.returncode, json.loads(r.stdout)


def _drain_reasons(env: dict[str, str]) -> dict[str, str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-p", "cpu", "-o", "%N|%T|%E"], env=env,
                         capture_output=True, text=True).stdout
    return {n: reason for n, st, reason in (line.split("|") for line in out.splitlines())
            if "drain" in st}


# 0.05 CPU, the least `local fault slow-cpu` takes: on a 2-core host busy with other work the
# unthrottled pairs share the cores too, and 0.1 CPU left the slowed pair at 0.5 x the median
# (0.150 vs 0.297 Gbps in one CI run), on the threshold itself.
# A 50 Mbit link is 20-35 x slower than the loopback pairs (0.006 vs 0.11-0.22 GB/s), so that
# sweep judges at 0.3 x the median: at the default 0.5 a healthy partner's retest that met the
# suite's busiest moment (every worker booting its twin) fell below half its round's controls
# twice and was blamed beside the slowed node
@pytest.mark.parametrize(("kind", "node", "args", "threshold"), [
    ("slow-net", "cpu-dy-c5-8", ["--rate", "50mbit"], "0.3"),
    ("slow-cpu", "cpu-dy-c5-3", ["--cpus", "0.05"], "0.5"),
])
def test_sweep_names_and_drains_exactly_the_slowed_node(slow_twin, kind, node, args, threshold):
    t, env, work = slow_twin
    r = subprocess.run([PCTK, "local", "fault", kind, node, *args, "--state-dir",
                        str(t.state_dir)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    rc, res = _sweep(env, work, "--drain", "--threshold", threshold)
    assert res["threshold"] == float(threshold)
    assert res["blamed"] == [node], [(p["round"], p["nodes"], p["gbps"]) for p in res["pairs"]]
    assert rc == 1
    # 8 nodes: all 4 pairs at once, then the slow pair's two nodes with a good partner (and
    # control pairs), then the one still slow with a second good partner: 3 rounds on a quiet
    # host (held exactly by test_slownodes_logic with measured figures given). On a busy one a
    # retest can also fall below its round's controls, costing a round more within the limit
    # (CI saw 4 rounds, and 12 pairs in 3), the right node still the only one blamed. A retest
    # round runs its suspects beside at most as many control pairs: at most 2 + 2 pairs
    assert 3 <= res["rounds"] <= res["max_rounds"] == 4
    later = [(p["round"], p["nodes"]) for p in res["pairs"] if p["round"] > 1]
    assert len(later) <= 4 * (res["rounds"] - 1), later
    assert res["drained"] == [node]
    reasons = _drain_reasons(env)
    assert list(reasons) == [node]
    assert reasons[node].startswith("pctk: slow-node: ") and " vs median " in reasons[node]


def test_no_fault_blames_no_node_over_repeated_runs(slow_twin):
    _, env, work = slow_twin
    # run from a shell an earlier torchrun session left its rendezvous in: the pairs still
    # meet on their own first node and job-derived port (else every pair waits on 10.9.9.9)
    env = {**env, "MASTER_ADDR": "10.9.9.9", "MASTER_PORT": "29500"}
    for i in range(2):
        rc, res = _sweep(env, work / str(i), "--drain")
        assert res["blamed"] == [] and res["drained"] == [], res["verdicts"]
        assert rc == 0
    assert _drain_reasons(env) == {}


def test_rerun_on_a_subset_and_an_odd_count(slow_twin):
    _, env, work = slow_twin
    rc, res = _sweep(env, work, "--nodes", "cpu-dy-c5-[1-5]")
    assert res["nodes"] == NODES[:5] and rc == 0
    # the odd node out is tested in round 2 with a node measured fast in round 1
    r2 = [p for p in res["pairs"] if p["round"] == 2]
    assert r2[0]["nodes"][0] == "cpu-dy-c5-5" and res["rounds"] >= 2


def test_a_pair_that_slurm_will_not_start_fails_without_waiting_for_the_timeout(slow_twin):
    _, env, work = slow_twin
    # c5-2 drained (as by an operator or a health check): Slurm lists it as up, so its pair
    # job is submitted, and pends. The sweep sees why and cancels that pair at once instead
    # of waiting for the round's timeout; the node FAILs without a retest, its partner is
    # retested with a good node. (Set down by Slurm mid-sweep takes the same path.)
    subprocess.run(["scontrol", "update", "NodeName=cpu-dy-c5-2", "State=DRAIN",
                    "Reason=disk replacement"], env=env, check=True)
    timeout = 240
    # 6 nodes: with c5-2 lost, c5-1's retests still run beside a control pair of good nodes
    # (with 4 they ran alone, judged against round 1 only, and a busy moment made c5-1 SLOW).
    # The other sweeps' 4M x 10 iterations: 1M x 3 timed ~10 ms a pair, where one stall of
    # a loaded machine halves a figure (a fresh-clone run struck c5-1 twice and called it SLOW)
    r = subprocess.run([PCTK, "health", "slow-nodes", "--nodes", "cpu-dy-c5-[1-6]",
                        "--partition", "cpu", "--size", "4M", "--iters", "10",
                        "--timeout", str(timeout), "--workdir", str(work), "--json"],
                       capture_output=True, text=True, env=env, timeout=600)
    res = json.loads(r.stdout)
    verdicts = {v["node"]: v for v in res["verdicts"]}
    dead = verdicts["cpu-dy-c5-2"]
    assert dead["verdict"] == "FAIL", dead
    assert dead["evidence"].startswith("Slurm: idle+") and "drain (disk replacement)" \
        in dead["evidence"] and "round 1 pair with cpu-dy-c5-1" in dead["evidence"], dead
    figures = [(p["round"], p["nodes"], p["gbps"]) for p in res["pairs"]]
    assert verdicts["cpu-dy-c5-1"]["verdict"] == "OK" and r.returncode == 1, figures
    first = next(p for p in res["pairs"] if "cpu-dy-c5-2" in p["nodes"])
    assert list(first["lost"]) == ["cpu-dy-c5-2"] and "cancelled" in first["error"]
    # c5-2 is not tried again; c5-1 is retested with a good partner in round 2, and again in
    # a later round each time a retest met a busy moment (CI saw 4 of the 4 rounds 5 live
    # nodes allow), never beyond the limit
    assert 2 <= res["rounds"] <= res["max_rounds"] == 4, figures
    assert sum("cpu-dy-c5-2" in p["nodes"] for p in res["pairs"]) == 1, figures
    assert res["wall_s"] < timeout / 2, "the sweep waited for the round's timeout"
    # not drained again by the sweep (only SLOW nodes are), its reason is the operator's
    assert _drain_reasons(env) == {"cpu-dy-c5-2": "disk replacement"}


class _Sleeps(PairTest):
    """A pair command that never finishes (stands for a hung benchmark)."""

    def command(self, out: Path) -> str:
        return "srun --ntasks-per-node=1 sleep 300"


def test_a_pair_still_running_at_the_timeout_is_cancelled_and_gets_no_figure(slow_twin,
                                                                             monkeypatch):
    t, env, work = slow_twin
    for k, v in t.env().items():  # the runner talks to this module's twin
        monkeypatch.setenv(k, v)
    runner = SlurmPairs(test=_Sleeps(), workdir=work, partition="cpu", timeout=10, poll=0.5)
    t0 = time.monotonic()
    [res] = runner(1, [("cpu-dy-c5-5", "cpu-dy-c5-6")])
    assert time.monotonic() - t0 < 60
    assert res.gbps is None and res.lost == {}
    # RUNNING, unless this machine was too busy to start it in 10 s: still not a result
    assert res.error is not None and res.error.startswith("no result within 10 s (was ")
    assert "): cancelled" in res.error, res.error
    # and Slurm has really ended it
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        st = subprocess.run(["squeue", "-h", "-j", res.job_id or "", "-o", "%T"], env=env,
                            capture_output=True, text=True).stdout.strip()
        if st in ("", "CANCELLED"):
            break
        time.sleep(0.5)
    assert st in ("", "CANCELLED"), st
