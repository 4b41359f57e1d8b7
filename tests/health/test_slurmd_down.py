"""A node whose slurmd is down: reported FAIL on the node check with Slurm's reason and
drained, without hanging the sweep; once slurmd is back, --resume-healthy returns it.

Runs on its own small twin (2 gpu + 2 cpu nodes) so the shared one is untouched. The slurmd
is stopped by the pid the twin recorded, and restarted here (not by Twin.up, which would
resume drained nodes itself); this test stops the restarted one by its pid.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest

from tests.health.faults import failing, node_table, read_record, wait_state
from toolkit.cli import main
from toolkit.local import power, procs
from toolkit.local.twin import Twin

pytestmark = pytest.mark.twin

DEAD = "gpu-st-p5-2"


def test_dead_slurmd_fails_node_check_is_drained_and_resumed_when_back(monkeypatch):
    state = Path(tempfile.mkdtemp(prefix="pctk-hd-", dir="/tmp"))
    twin = Twin(state)
    restarted: list[procs.Proc] = []
    try:
        twin.up("p5-training", nodes=2, accounting=False)
        for k, v in twin.env().items():
            monkeypatch.setenv(k, v)
        env = dict(os.environ)
        mnt = state / "mnt"
        mnt.mkdir()
        rec_state = json.loads((state / "twin.json").read_text())
        slurmd = [procs.Proc.from_json(p) for p in rec_state["procs"]
                  if p["name"] == f"slurmd:{DEAD}"]
        assert len(slurmd) == 1
        assert procs.stop(slurmd) == []
        # slurmctld notices after its next ping (SlurmdTimeout=30 on the twin)
        wait_state(env, DEAD, lambda f: bool(f & {"not_responding", "down"}), timeout=120)

        out = state / "rec1.json"
        t0 = time.monotonic()
        rc = main(["health", "run", "--partition", "gpu", "--drain", "--mount", str(mnt),
                   "--workdir", str(state / "runs"), "--timeout", "60", "--out", str(out)])
        took = time.monotonic() - t0
        rec = read_record(out)
        assert rc == 2
        assert took < 30, f"sweep took {took:.1f}s"
        assert failing(rec) == {"gpu-st-p5-1": set(), DEAD: {"node"}}
        dead = rec["metrics"]["nodes"][DEAD]
        assert list(dead) == ["node"]  # not put in the job
        assert "not_responding" in dead["node"]["message"] or "down" in dead["node"]["message"]
        table = node_table(env)
        assert table["gpu-st-p5-1"] == ("idle", "")
        assert "drain" in table[DEAD][0] and table[DEAD][1].startswith("pctk: node: ")

        # bring slurmd back: the node registers but stays drained
        # as the twin starts it: its own host name and address where the twin gives nodes one
        restarted.append(power.start_slurmd(state, DEAD, env, twin.slurm_conf))
        wait_state(env, DEAD, lambda f: not f & {"not_responding", "down"}, timeout=60)
        assert node_table(env)[DEAD][1].startswith("pctk: node: ")

        out = state / "rec2.json"
        rc = main(["health", "run", "--partition", "gpu", "--resume-healthy", "--mount",
                   str(mnt), "--workdir", str(state / "runs"), "--timeout", "60",
                   "--out", str(out)])
        rec = read_record(out)
        assert rc == 0, rec["verdict"]
        assert rec["params"]["resumed"] == [DEAD]
        table = node_table(env)
        assert table[DEAD] == ("idle", "") and table["gpu-st-p5-1"] == ("idle", "")
    finally:
        procs.stop(restarted)
        twin.down(purge=True)
