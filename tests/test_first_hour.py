"""A researcher's first hour, scripted: each step is the command a new user types, in order.

Every step runs ``pctk`` as a separate process in one shell-like environment (``FirstHour``):
its own state root (``PCTK_HOME``, ``PCTK_TWIN_DIR``) and no ``SLURM_CONF``, as for someone who
never ran ``eval "$(pctk local env)"``. Steps share what they learn through ``hour.facts``.
To add a step, add ``test_<n>_<what the user does>(hour)`` with n between the last step and
99 (the clean-up check stays last).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from toolkit.local.mounts import MARKER

pytestmark = pytest.mark.twin

MINE = """\
Region: us-east-1
Image: {Os: ubuntu2204}
HeadNode: {InstanceType: c5.4xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}
Scheduling:
  Scheduler: slurm
  SlurmSettings:
    Database:
      Uri: "db:3306"
      UserName: slurm
      PasswordSecretArn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdb"
  SlurmQueues:
    - Name: train
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      ComputeResources:
        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 0, MaxCount: 4}
SharedStorage:
  - {Name: fsx, StorageType: FsxLustre, MountDir: /fsx,
     FsxLustreSettings: {StorageCapacity: 1200}}
"""


@dataclass
class FirstHour:
    home: Path  # PCTK_HOME: results, jobs, everything pctk keeps
    root: Path  # PCTK_TWIN_DIR: one folder per cluster's twin
    work: Path  # the user's own files (configs)
    facts: dict[str, Any] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("SLURM_CONF", "PCTK_JOBS_DIR", "PCTK_CLUSTER_CONFIG")}
        env.update(PCTK_HOME=str(self.home), PCTK_TWIN_DIR=str(self.root), COLUMNS="200")
        return env

    def pctk(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], capture_output=True,
                              text=True, env=self.env(), cwd=self.work, timeout=timeout)

    def ok(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        r = self.pctk(*args, timeout=timeout)
        assert r.returncode == 0, f"pctk {' '.join(args)} -> {r.returncode}: {r.stderr[-2000:]}"
        return r

    def json(self, *args: str) -> Any:
        """``pctk ARGS --json`` (before a ``--`` that starts the user's command)."""
        cut = args.index("--") if "--" in args else len(args)
        return json.loads(self.ok(*args[:cut], "--json", *args[cut:]).stdout)


@pytest.fixture(scope="module")
def hour() -> Iterator[FirstHour]:
    base = Path(tempfile.mkdtemp(prefix="pctk-fh-", dir="/tmp"))  # short: sockets live inside
    h = FirstHour(home=base / "home", root=base / "twins", work=base / "work")
    h.work.mkdir()
    h.facts["fsx_existed"] = os.path.exists("/fsx")
    try:
        yield h
    finally:
        for cluster in ("mine", "p5_training"):
            if (h.root / cluster).exists():
                h.pctk("local", "down", "--purge", "--cluster", cluster)
        shutil.rmtree(base, ignore_errors=True)


def test_1_local_up_with_a_preset(hour):
    r = hour.ok("local", "up", "--config", "p5-training")
    assert "ready in" in r.stdout
    st = hour.json("local", "status")
    assert st["cluster"] == "p5_training" and st["state"] == "running"
    # the config's node counts: cpu/c5 has MaxCount 8
    assert sum(n["partition"] == "cpu" for n in st["nodes"]) == 8
    fsx = next(m for m in st["mounts"] if m["path"] == "/fsx")
    assert fsx["kind"] in ("standin", "existing") and os.path.isdir("/fsx")


def test_2_a_job_runs_without_pointing_the_shell_at_the_twin(hour):
    sub = hour.json("submit", "-q", "cpu", "-N", "8", "-J", "p5-first", "--wait", "--",
                    "hostname")
    assert sub["states"] == {sub["job_ids"][0]: "COMPLETED"}
    hour.facts["p5_job"] = sub["job_ids"][0]


def test_3_local_up_with_another_config_just_works(hour):
    mine = hour.work / "mine.yaml"
    mine.write_text(MINE)
    r = hour.ok("local", "up", "--config", str(mine), "--nodes", "2")
    assert "stopping the twin of cluster p5_training" in r.stderr
    assert "capped: train/c5 has 2 of its 4 nodes (--nodes 2)" in r.stdout
    st = hour.json("local", "status")
    assert (st["cluster"], st["state"]) == ("mine", "running")
    assert st["state_dir"] == str(hour.root / "mine")
    # a plain `up` means the twin that runs, as it was started (not the default preset)
    again = hour.ok("local", "up")
    assert "already running" in again.stderr and "stopping" not in again.stderr
    stopped = hour.pctk("local", "status", "--cluster", "p5_training")
    assert stopped.returncode == 3 and "stopped" in stopped.stdout
    sub = hour.json("submit", "-q", "train", "-N", "2", "-J", "mine-first", "--wait", "--",
                    "true")
    assert list(sub["states"].values()) == ["COMPLETED"]


def test_4_more_nodes_than_the_partition_has_is_refused_in_one_line(hour):
    r = hour.pctk("submit", "-q", "train", "-N", "3", "--", "hostname")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "queue train can never run this job (train has 2 nodes)" in r.stderr
    r = hour.pctk("submit", "-q", "train", "-N", "5", "--", "hostname")
    assert r.returncode == 2 and "queue train has at most 4 nodes" in r.stderr


def test_5_switching_back_keeps_each_clusters_accounting(hour):
    r = hour.ok("local", "up", "--config", "p5-training")
    assert "stopping the twin of cluster mine" in r.stderr
    jobs = hour.json("jobs")["jobs"]
    names = {j["JobID"]: (j["JobName"], j["State"]) for j in jobs}
    assert names.get(hour.facts["p5_job"]) == ("p5-first", "COMPLETED")
    assert "mine-first" not in {n for n, _ in names.values()}


def test_6_python_submits_to_the_running_twin_without_setup(hour):
    code = ("from toolkit.submit import ClusterExecutor\n"
            "ex = ClusterExecutor('py-jobs', queue='cpu', timeout_min=5)\n"
            "print(ex.submit(sum, [20, 22]).result())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=hour.env(), cwd=hour.work, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["42"]


@pytest.mark.parametrize("argv", [
    ["health", "run", "-p", "nosuch"],
    ["health", "slow-nodes", "-p", "nosuch"],
    ["bench", "collectives", "-N", "1", "-p", "nosuch", "--no-store"],
    ["bench", "fsdp", "--model", "tiny", "-N", "1", "--gpus-per-node", "0", "-p", "nosuch",
     "--no-store"],
    # no --target, no --config: the running twin's config names /fsx; a preset name as
    # every other command takes it
    ["bench", "storage", "-N", "1", "-p", "nosuch", "--no-store"],
    ["bench", "storage", "-N", "1", "-p", "nosuch", "--no-store", "--config", "p5-training"],
])
def test_7_health_and_bench_find_the_running_twin_without_local_env(hour, argv):
    # each asks the twin's Slurm about partition `nosuch`: the answer is about the partition,
    # not "no Slurm configuration, start the twin" while it runs
    r = hour.pctk(*argv)
    assert r.returncode in (2, 3), r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pctk: error: "), r.stderr
    assert "nosuch" in lines[0] or "invalid partition" in lines[0].lower(), lines[0]
    assert "configuration" not in lines[0] and "local up" not in lines[0], lines[0]
    assert not (hour.work / "pctk-runs").exists()  # run folders live under the state root
    if argv[:2] == ["bench", "storage"]:
        assert list((hour.home / "runs").glob("storage-*")), "no run folder under PCTK_HOME"


def test_99_down_purge_removes_every_twin_and_its_stand_ins(hour):
    hour.ok("local", "down", "--purge")
    hour.ok("local", "down", "--purge", "--cluster", "mine")
    assert not [p for p in hour.root.iterdir() if (p / "twin.json").exists()]
    status = hour.pctk("local", "status")
    assert status.returncode == 3
    if not hour.facts["fsx_existed"] and os.path.exists("/fsx"):
        # another twin on this machine still uses the stand-in: only it may be named there
        users = (Path("/fsx") / MARKER).read_text()
        assert str(hour.root) not in users
