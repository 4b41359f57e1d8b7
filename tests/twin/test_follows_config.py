"""The session twin (cpu: 4 of the config's 8 nodes): impossible jobs, pending reasons, lookup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from toolkit.errors import PctkError
from toolkit.local.twin import Twin
from toolkit.submit import ClusterExecutor

pytestmark = pytest.mark.twin


def _pctk(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def _queued(twin) -> list[str]:
    return twin.cmd("squeue", "-h", "-o", "%i").stdout.split()


def test_submit_refuses_more_nodes_than_the_partition_has_in_one_line(twin, tmp_path):
    env = {**twin.env, "PCTK_JOBS_DIR": str(tmp_path / "jobs")}
    before = _queued(twin)
    r = _pctk(env, "submit", "-q", "cpu", "-N", "5", "--", "hostname")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "queue cpu can never run this job (cpu has 4 nodes)" in r.stderr
    assert _queued(twin) == before
    assert not (tmp_path / "jobs").exists() or not list((tmp_path / "jobs").glob("*/job.sh"))


def test_submit_waits_for_a_node_that_is_only_down_and_says_so(twin, tmp_path):
    # sbatch --test-only leaves a down node out and answers as for an impossible job
    env = {**twin.env, "PCTK_JOBS_DIR": str(tmp_path / "jobs")}
    twin.cmd("scontrol", "update", "NodeName=gpu-st-p5-4", "State=DOWN", "Reason=maintenance")
    try:
        r = _pctk(env, "submit", "-q", "gpu", "-N", "4", "--json", "--", "true")
        assert r.returncode == 0, r.stderr
        sub = json.loads(r.stdout)
        twin.cmd("scancel", *sub["job_ids"])
        assert "gpu-st-p5-4 (down: maintenance)" in sub["note"]
        # what the configuration can never hold is still refused at once
        r = _pctk(env, "submit", "-q", "gpu", "-N", "4", "--tasks-per-node", "99", "--", "true")
        assert r.returncode == 2 and "can never run" in r.stderr, r.stderr
    finally:
        twin.cmd("scontrol", "update", "NodeName=gpu-st-p5-4", "State=RESUME")


def test_cluster_executor_refuses_what_the_partition_can_never_run(twin, tmp_path):
    ex = ClusterExecutor(tmp_path / "ex", queue="cpu", nodes=5, timeout_min=5)
    before = _queued(twin)
    with pytest.raises(PctkError, match=r"cpu has 4 nodes"):
        ex.submit(print, "never")
    assert _queued(twin) == before
    fits = ClusterExecutor(tmp_path / "ok", queue="cpu", nodes=4).submit(int, "7")
    assert fits.results() == [7, 7, 7, 7]


def test_plain_sbatch_rejects_a_job_larger_than_its_partition(twin):
    # EnforcePartLimits=ALL, as on ParallelCluster: refused at submission, not left pending
    before = _queued(twin)
    r = twin.cmd("sbatch", "--partition=cpu", "--nodes=5", "--wrap=true", check=False)
    assert r.returncode != 0
    assert "Node count specification invalid" in r.stderr, r.stderr
    # no job added (an earlier test's job may end meanwhile, so not equality)
    assert not set(_queued(twin)) - set(before)


def test_jobs_finds_the_twin_without_slurm_conf_and_shows_why_a_job_waits(twin):
    job, _ = twin.sbatch("true", "--partition=cpu", "--begin=now+3600")
    try:
        env = {k: v for k, v in twin.env.items() if k != "SLURM_CONF"}
        env["PCTK_TWIN_DIR"] = str(twin.state_dir)
        # Slurm may first give another reason (CI saw Resources once, on a busy twin) until its
        # scheduler has looked at the job: pctk shows what Slurm says, so ask until it settles
        deadline = time.monotonic() + 30
        while True:
            r = _pctk(env, "jobs", "--json")
            assert r.returncode == 0, r.stderr
            rows = {row["JobID"]: row for row in json.loads(r.stdout)["jobs"]}
            assert rows.get(job, {}).get("State") == "PENDING", r.stdout
            if rows[job]["Reason"] == "BeginTime" or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert rows[job]["Reason"] == "BeginTime", twin.cmd("squeue", "-j", job, "-o",
                                                            "%i %T %r %S").stdout
        table = _pctk({**env, "COLUMNS": "200"}, "jobs")
        assert "BeginTime" in table.stdout and "reason" in table.stdout
    finally:
        twin.cmd("scancel", job, check=False)


def test_status_says_what_stands_in_for_shared_storage(twin):
    st = twin.twin.status()
    fsx = next(m for m in st.mounts if m["path"] == "/fsx")
    assert fsx["kind"] in ("standin", "existing")
    assert os.path.isdir("/fsx")
    home = next(m for m in st.mounts if m["path"] == "/home")
    assert home["kind"] == "existing"
    out = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "status",
                          "--state-dir", str(twin.state_dir)], capture_output=True, text=True,
                         env=twin.env, timeout=60).stdout
    assert "/fsx: " in out and "/home: exists on this machine: used as it is" in out


def test_one_state_folder_refuses_a_second_cluster_with_a_clear_line(tmp_path):
    state = Path(tempfile.mkdtemp(prefix="pctk-1c-", dir="/tmp"))
    other = tmp_path / "mine.yaml"
    other.write_text((Path(__file__).parents[2] / "cluster-configs" / "g5-dev.yaml").read_text())
    twin = Twin(state)
    try:
        twin.up("p5-training", nodes=1, accounting=False)
        twin.down()
        # slurmctld would refuse the shared StateSaveLocation; say so before starting anything
        with pytest.raises(PctkError, match="holds the twin of cluster p5_training, not mine"):
            twin.up(other, nodes=1, accounting=False)
        assert not twin.any_daemon_up()
    finally:
        twin.down(purge=True)


def test_a_root_that_was_one_twin_gains_a_folder_per_cluster_and_purges_only_its_own(tmp_path):
    from toolkit.local import clusters

    root = Path(tempfile.mkdtemp(prefix="pctk-r-", dir="/tmp"))
    mine = tmp_path / "mine.yaml"
    mine.write_text((Path(__file__).parents[2] / "cluster-configs" / "g5-dev.yaml").read_text())
    old = Twin(root)  # the layout before one folder per cluster: twin.json in the root
    try:
        old.up("p5-training", nodes=1, accounting=False)
        said: list[str] = []
        st = clusters.up(mine, root, nodes=1, accounting=False, progress=said.append)
        assert st.running and st.state_dir == root / "mine"
        assert any("stopping the twin of cluster p5_training" in m for m in said)
        assert not old.any_daemon_up()
        assert set(clusters.known(root)) == {"p5_training", "mine"}
        assert clusters.select(root).state_dir == root / "mine"
        assert clusters.select(root, "p5_training").state_dir == root
        old.down(purge=True)
        assert (root / "mine" / "twin.json").exists() and not (root / "twin.json").exists()
        assert clusters.select(root).is_running()
    finally:
        Twin(root / "mine", root=root).down(purge=True)
        old.down(purge=True)
