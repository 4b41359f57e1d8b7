"""The prolog/epilog script, run by hand on a twin node's behalf as slurmd would run it
(the shared twin's slurm.conf is not ours to change, so Prolog= is not set there)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.health.faults import node_table
from toolkit.health.expect import build_expectations

pytestmark = pytest.mark.twin

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "sbatch" / "prolog-health.sh"
NODE = "cpu-dy-c5-4"


def _run(twin, expect: Path, context: str) -> tuple[int, float]:
    env = dict(twin.env, SLURMD_NODENAME=NODE, PCTK_HEALTH_HOME=str(REPO),
               PCTK_HEALTH_EXPECT=str(expect), SLURM_SCRIPT_CONTEXT=context, SLURM_JOB_ID="1")
    t0 = time.monotonic()
    r = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True,
                       timeout=60)
    return r.returncode, time.monotonic() - t0


def test_prolog_passes_fast_and_drains_itself_on_failure(twin, tmp_path):
    good = tmp_path / "fsx"
    good.mkdir()
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps(build_expectations(["c5.4xlarge"], mounts=[str(good)],
                                                    nodes={NODE: "c5.4xlarge"})))
    try:
        rc, took = _run(twin, expect, "prolog_slurmd")
        assert rc == 0 and took < 5, (rc, took)
        assert node_table(twin.env)[NODE] == ("idle", "")

        expect.write_text(json.dumps(build_expectations(
            ["c5.4xlarge"], mounts=[str(tmp_path / "not-mounted")], nodes={NODE: "c5.4xlarge"})))
        rc, took = _run(twin, expect, "prolog_slurmd")
        assert rc == 1 and took < 5
        state, reason = node_table(twin.env)[NODE]
        assert "drain" in state
        assert reason == f"pctk: storage: {tmp_path / 'not-mounted'} missing"
        # the epilog drains too but does not fail the finished job
        assert _run(twin, expect, "epilog_slurmd")[0] == 0
    finally:
        subprocess.run(["scontrol", "update", f"NodeName={NODE}", "State=RESUME"], env=twin.env)
