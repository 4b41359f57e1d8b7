"""The twin follows what the config says about its queues and accounting, on real Slurm:
JobExclusiveAllocation, a config `pctk config check` rejects, no Database."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from toolkit.local import clusters

pytestmark = pytest.mark.twin


def _running_nodes(twin, ids: list[str], timeout: float = 120) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        out = twin.cmd("squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%N").stdout
        seen = {i: n for i, st, n in (ln.split("|") for ln in out.splitlines())
                if st == "RUNNING"}
        if len(seen) == len(ids):
            return seen
        time.sleep(0.5)
    raise AssertionError(f"jobs {ids} not all running after {timeout}s: {seen}")


def test_exclusive_queue_gives_each_job_its_own_node(twin):
    # p5-training's gpu queue: JobExclusiveAllocation: true -> OverSubscribe=EXCLUSIVE
    part = twin.cmd("scontrol", "-o", "show", "partition", "gpu").stdout
    assert "OverSubscribe=EXCLUSIVE" in part, part
    cpu = twin.cmd("scontrol", "-o", "show", "partition", "cpu").stdout
    assert "OverSubscribe=NO" in cpu, cpu  # the cpu queue does not set it
    ids = [twin.sbatch("sleep 120", "-p", "gpu", "-n", "1", "--gres=gpu:1")[0]
           for _ in range(2)]
    try:
        nodes = _running_nodes(twin, ids)
        # two 1-GPU jobs would share one 8-GPU node; an exclusive partition gives each a node
        assert len(set(nodes.values())) == 2, nodes
    finally:
        twin.cmd("scancel", *ids, check=False)


BAD = """\
Region: us-east-1
Image: {Os: ubuntu2204}
HeadNode: {InstanceType: c5.4xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}
Scheduling:
  Scheduler: slurm
  SlurmQueues:
    - Name: cpu
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      ComputeResources:
        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 4, MaxCount: 2}
"""


def _pctk(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def test_a_rejected_config_stops_nothing_and_force_says_so(tmp_path):
    root = Path(tempfile.mkdtemp(prefix="pctk-rj-", dir="/tmp"))
    bad = tmp_path / "nc-p4d.yaml"
    bad.write_text(BAD)
    env = {**os.environ, "PCTK_TWIN_DIR": str(root), "COLUMNS": "250"}
    try:
        first = clusters.up("p5-training", root, nodes=1, accounting=False)
        assert first.running
        r = _pctk("local", "up", "--config", str(bad), env=env)
        assert r.returncode == 2, r.stderr
        assert "MinCount: Max count must be greater than or equal to min count" in r.stderr
        # checked before anything was stopped: the running twin runs on, untouched
        assert clusters.select(root, "p5_training").is_running()
        assert "stopping" not in r.stderr
        forced = _pctk("local", "up", "--config", str(bad), "--force", env=env)
        assert forced.returncode == 0, forced.stderr
        out = forced.stdout + forced.stderr
        assert "WARNING: started with --force although `pctk config check` rejects" in out
        # no Database in the config: no accounting, and the user is told what that costs
        assert "accounting off: the config has no Scheduling/SlurmSettings/Database" in out
        assert "sacct" in out
        # the name the user wrote finds the twin (Slurm's is nc_p4d)
        st = _pctk("local", "status", "--cluster", "nc-p4d", env=env)
        assert st.returncode == 0, st.stderr
        assert "WARNING: started with --force" in st.stdout
        assert "accounting off" in st.stdout
        sacct = subprocess.run(["sacct", "-n"], capture_output=True, text=True,
                               env={**env, **clusters.select(root, "nc-p4d").env()})
        assert sacct.returncode != 0  # as on a cluster without a Database
        assert not clusters.select(root, "p5_training").any_daemon_up()
    finally:
        for t in clusters.known(root).values():
            t.down(purge=True)
        shutil.rmtree(root, ignore_errors=True)


def test_accounting_flag_turns_it_on_for_a_config_without_database(tmp_path):
    root = Path(tempfile.mkdtemp(prefix="pctk-ac-", dir="/tmp"))
    cfg = tmp_path / "nodb.yaml"
    cfg.write_text(BAD.replace("MinCount: 4", "MinCount: 1"))
    env = {**os.environ, "PCTK_TWIN_DIR": str(root), "COLUMNS": "250"}
    try:
        r = _pctk("local", "up", "--config", str(cfg), "--accounting", env=env)
        assert r.returncode == 0, r.stderr
        assert "accounting off" not in r.stdout + r.stderr
        twin = clusters.select(root, "nodb")
        assert twin.status().accounting
        sacct = subprocess.run(["sacct", "-n"], capture_output=True, text=True,
                               env={**env, **twin.env()})
        assert sacct.returncode == 0, sacct.stderr
    finally:
        for t in clusters.known(root).values():
            t.down(purge=True)
        shutil.rmtree(root, ignore_errors=True)
