"""pctk logs on the twin: arrays, many ranks in numeric order, submitit jobs, no logs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.submit import ClusterExecutor

pytestmark = pytest.mark.twin


@pytest.fixture()
def jobs_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PCTK_JOBS_DIR", str(tmp_path / "jobs"))
    return tmp_path / "jobs"


def _pctk(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_array_job_id_shows_every_element_and_one_element_alone(twin, jobs_home):
    r = _pctk("submit", "-q", "cpu", "--array", "0-2", "--wait", "--json", "--",
              "bash", "-c", 'echo "element $SLURM_ARRAY_TASK_ID"')
    assert r.returncode == 0, r.stderr
    array_id = json.loads(r.stdout)["job_ids"][0]

    every = _pctk("logs", array_id)
    assert every.returncode == 0, every.stderr
    lines = every.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("element")] == [f"element {i}" for i in range(3)]
    assert f"==> {array_id}_0.0.out <==" in lines  # each file under its name

    rank0 = _pctk("logs", array_id, "--task", "0")
    assert [ln for ln in rank0.stdout.splitlines() if ln.startswith("element")] == \
        [f"element {i}" for i in range(3)]

    one = _pctk("logs", f"{array_id}_1")
    assert one.returncode == 0, one.stderr
    assert [ln for ln in one.stdout.splitlines() if ln.startswith("element")] == ["element 1"]


def test_sixteen_ranks_are_announced_as_nodes_by_tasks_and_printed_in_rank_order(
        twin, jobs_home):
    r = _pctk("submit", "-q", "gpu", "-N", "2", "--wait", "--",
              "bash", "-c", 'echo "rank $SLURM_PROCID"')
    assert r.returncode == 0, r.stderr
    m = re.match(r"submitted (\d+) \(2 nodes x 8 tasks = 16 ranks\) to gpu;", r.stdout)
    assert m, r.stdout
    out = _pctk("logs", m.group(1))
    assert out.returncode == 0, out.stderr
    ranks = [ln for ln in out.stdout.splitlines() if ln.startswith("rank ")]
    assert ranks == [f"rank {i}" for i in range(16)]  # 0..9 then 10..15, not 0, 1, 10, 11


def speak(word: str) -> str:
    print(f"hello {word} from submitit", flush=True)
    return word


def test_cluster_executor_jobs_have_their_submitit_logs_found(twin, jobs_home, tmp_path):
    ex = ClusterExecutor(tmp_path / "executor-folder", queue="cpu", timeout_min=5)
    job = ex.submit(speak, "single")
    elements = ex.map_array(speak, ["a", "b", "c"])
    assert job.result() == "single"
    assert [j.result() for j in elements] == ["a", "b", "c"]

    out = _pctk("logs", job.job_id)
    assert out.returncode == 0, out.stderr
    assert "hello single from submitit" in out.stdout

    array_id = elements[0].job_id.split("_")[0]
    every = _pctk("logs", array_id)  # every element, in index order
    said = [ln for ln in every.stdout.splitlines() if ln.startswith("hello")]
    assert said == [f"hello {w} from submitit" for w in "abc"]
    one = _pctk("logs", elements[1].job_id)
    assert [ln for ln in one.stdout.splitlines() if ln.startswith("hello")] == \
        ["hello b from submitit"]


def test_an_id_without_logs_is_one_line_and_exit_1(twin, jobs_home):
    r = _pctk("logs", "987654")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert "no logs found for job 987654" in r.stderr

    sub = _pctk("submit", "-q", "cpu", "--wait", "--json", "--", "true")
    job_id = json.loads(sub.stdout)["job_ids"][0]
    r = _pctk("logs", job_id, "--task", "5")
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1
    assert f"no logs found for task 5 of job {job_id}" in r.stderr


@pytest.mark.parametrize("replacement", ["fifo", "symlink"])
def test_a_log_that_is_a_fifo_or_a_symlink_is_refused_in_one_line(twin, jobs_home, tmp_path,
                                                                  replacement):
    sub = _pctk("submit", "-q", "cpu", "--wait", "--json", "--", "echo", "the real log")
    assert sub.returncode == 0, sub.stderr
    info = json.loads(sub.stdout)
    (log,) = [p for p in Path(info["folder"]).glob(f"{info['job_ids'][0]}.*.out")
              if p.read_text().strip() == "the real log"]
    log.unlink()
    if replacement == "fifo":
        os.mkfifo(log)  # no writer: a plain open() waits for one for ever
        kind = "a FIFO"
    else:
        secret = tmp_path / "secret"
        secret.write_text("root:$6$not-for-the-job-owner\n")  # /etc/shadow's stand-in
        log.symlink_to(secret)
        kind = "a symbolic link"
    r = _pctk("logs", info["job_ids"][0], timeout=60)  # before: a FIFO hung it for ever
    assert r.returncode == 2
    assert r.stderr.startswith(f"pctk: error: {log}: not a regular file ({kind}), so it is "
                               "not shown; fix: "), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "not-for-the-job-owner" not in r.stdout
