"""Arrays longer than the cluster's MaxArraySize, on a twin whose slurm.conf really has
MaxArraySize=10 (set through the config's CustomSlurmSettings, as on ParallelCluster)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from toolkit.local.twin import Twin
from toolkit.submit import ClusterExecutor, max_array_size

pytestmark = pytest.mark.twin

CONFIG = """\
Region: us-east-1
Image: {Os: ubuntu2204}
HeadNode: {InstanceType: c5.4xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}
Scheduling:
  Scheduler: slurm
  SlurmSettings:
    Database:
      Uri: db.example:3306
      UserName: slurm
      PasswordSecretArn: arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdb
    CustomSlurmSettings:
      - MaxArraySize: 10
  SlurmQueues:
    - Name: cpu
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      ComputeResources:
        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 0, MaxCount: 2}
"""


@pytest.fixture(scope="module")
def small_arrays(tmp_path_factory):
    cfg = tmp_path_factory.mktemp("cfg") / "arrays.yaml"
    cfg.write_text(CONFIG)
    twin = Twin(Path(tempfile.mkdtemp(prefix="pctk-arr-", dir="/tmp")))
    twin.up(cfg, nodes=2)
    mp = pytest.MonkeyPatch()
    for k, v in twin.env().items():
        mp.setenv(k, v)
    try:
        yield twin
    finally:
        mp.undo()
        twin.down(purge=True)


def _sacct(*args: str) -> str:
    return subprocess.run(["sacct", *args], capture_output=True, text=True, check=True).stdout


def test_the_twin_enforces_max_array_size(small_arrays):
    assert max_array_size() == 10
    r = subprocess.run(["sbatch", "--array=0-10", "--wrap=true"], capture_output=True, text=True)
    assert r.returncode != 0 and "Invalid job array specification" in r.stderr


def test_executor_splits_and_keeps_the_concurrency_limit(small_arrays, tmp_path):
    ex = ClusterExecutor(tmp_path, queue="cpu", timeout_min=5, array_parallelism=4)
    jobs = ex.map_array(pow, range(23), [2] * 23)
    arrays = sorted({j.job_id.split("_")[0] for j in jobs}, key=int)
    assert len(arrays) == 3
    assert [j.result() for j in jobs] == [i * i for i in range(23)]
    times: dict[str, tuple[list[str], list[str]]] = {}
    for line in _sacct("-n", "-X", "-P", "-o", "JobID,Start,End", "-j",
                       ",".join(arrays)).splitlines():
        jid, start, end = line.split("|")
        starts, ends = times.setdefault(jid.split("_")[0], ([], []))
        starts.append(start)
        ends.append(end)
    for a, b in itertools.pairwise(arrays):
        assert min(times[b][0]) >= max(times[a][1])  # the next array waited for this one


def test_cli_array_covers_every_index(small_arrays, tmp_path):
    seen = tmp_path / "seen"
    seen.mkdir()
    env = {**os.environ, "PCTK_JOBS_DIR": str(tmp_path / "jobs")}
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "submit", "-q", "cpu", "--array",
                        "0-24", "--wait", "--json", "--", "bash", "-c",
                        f'touch {seen}/"$PCTK_ARRAY_TASK_ID"'],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(__import__("json").loads(r.stdout)["job_ids"]) == 3
    assert sorted(int(p.name) for p in seen.iterdir()) == list(range(25))
