"""Without Slurm accounting (a ParallelCluster with no SlurmSettings/Database).

submitit alone polls a failing sacct forever; pctk's watcher falls back to squeue, reports a
job that died without a result within one poll, and makes one call per poll for any number
of watched jobs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import submitit

from toolkit.local.twin import Twin
from toolkit.submit import ClusterExecutor
from toolkit.submit import watcher as watcher_mod
from toolkit.submit.watcher import GONE, PctkWatcher

pytestmark = pytest.mark.twin


@pytest.fixture(scope="module")
def plain_twin():
    state = Path(tempfile.mkdtemp(prefix="pctk-na-", dir="/tmp"))
    twin = Twin(state)
    twin.up("p5-training", nodes=2, accounting=False)
    mp = pytest.MonkeyPatch()
    for k, v in twin.env().items():
        mp.setenv(k, v)
    watcher_mod._ACCOUNTING.clear()
    try:
        yield twin
    finally:
        mp.undo()
        watcher_mod._ACCOUNTING.clear()
        twin.down(purge=True)


def test_sacct_really_is_unavailable(plain_twin):
    r = subprocess.run(["sacct", "-n", "-X"], capture_output=True, text=True)
    assert r.returncode != 0
    assert not watcher_mod.accounting_available()


def test_function_result_and_state_without_accounting(plain_twin, tmp_path):
    ex = ClusterExecutor(tmp_path, queue="cpu", timeout_min=5)
    job = ex.submit(divmod, 17, 5)
    assert job.result() == (3, 2)
    deadline = time.monotonic() + 30
    while job.get_info(mode="force").get("State") != "COMPLETED" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert job.state == "COMPLETED"


def test_cancelled_job_is_reported_failed_within_one_poll(plain_twin, tmp_path):
    ex = ClusterExecutor(tmp_path, queue="cpu", timeout_min=5)
    job = ex.submit(time.sleep, 300)
    deadline = time.monotonic() + 60
    while job.get_info(mode="force").get("State") != "RUNNING":
        assert time.monotonic() < deadline, job.get_info(mode="force")
        time.sleep(0.3)
    subprocess.run(["scancel", job.job_id], check=True)
    t0 = time.monotonic()
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
    # one poll interval of the watcher (10 s) plus Slurm's own kill time
    assert time.monotonic() - t0 < 10 + 10
    assert job.state.startswith("CANCELLED")


def test_jobs_from_squeue_keeps_names_with_a_bar_and_a_newline_whole(plain_twin, tmp_path):
    # no sacct here: pctk jobs reads squeue; a name with `|` and a newline stays one job
    # (it split the row and the command died with an IndexError)
    env = {**os.environ, "PCTK_JOBS_DIR": str(tmp_path / "jobs")}
    pctk = [sys.executable, "-m", "toolkit.cli"]
    names = ["a|b\nc", "x\n1|2|3|4|5|6", "plain"]
    for name in names:
        r = subprocess.run([*pctk, "submit", "-q", "cpu", "--wait", "-J", name, "--", "true"],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
    r = subprocess.run([*pctk, "jobs", "--json"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["source"] == "squeue"
    # (squeue's order differs between Slurm releases: 24.11 lists the newest first)
    assert sorted(j["JobName"] for j in data["jobs"] if j["JobName"] in names) == sorted(names)
    assert all(j["State"] == "COMPLETED" for j in data["jobs"] if j["JobName"] in names)
    r = subprocess.run([*pctk, "jobs"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "a|b\\nc" in r.stdout


def test_job_purged_from_the_controller_is_gone_not_waited_for(plain_twin):
    watcher = PctkWatcher(delay_s=1)
    watcher.register_job("999999")  # never existed: what a purged job looks like
    watcher.update()
    assert watcher.get_state("999999", mode="cache") == GONE
    assert watcher.is_done("999999", mode="cache")


def test_one_squeue_call_per_poll_for_many_jobs(plain_twin, tmp_path):
    ex = ClusterExecutor(tmp_path, queue="cpu", timeout_min=5)
    jobs = [ex.submit(abs, -i) for i in range(12)]
    watcher = PctkWatcher(delay_s=1)
    for j in jobs:
        watcher.register_job(j.job_id)
    polls = 0
    while not all(watcher.is_done(j.job_id, mode="cache") for j in jobs):
        watcher.update()
        polls += 1
        time.sleep(1)
        assert polls < 120
    assert len(watcher.commands) == polls
    assert all(cmd[0] == "squeue" for cmd in watcher.commands)
    assert [j.result() for j in jobs] == list(range(12))
    assert {watcher.get_state(j.job_id, mode="cache") for j in jobs} == {"COMPLETED"}


def test_plain_submitit_would_warn_on_every_poll(plain_twin):
    # the failure mode this module exists for: sacct errors on a cluster without accounting
    r = subprocess.run(["sacct", "-o", "JobID,State", "--parsable2", "-j", "1"],
                       capture_output=True, text=True, env=os.environ)
    assert r.returncode != 0 and "accounting" in r.stderr.lower()


def test_each_cluster_has_its_own_watcher(plain_twin, twin, tmp_path, monkeypatch):
    # job ids repeat across clusters: the twin with accounting and this one both count from 1
    monkeypatch.setenv("SLURM_CONF", twin.env["SLURM_CONF"])
    a = ClusterExecutor(tmp_path / "a", queue="cpu", timeout_min=5).submit(abs, -3)
    monkeypatch.setenv("SLURM_CONF", str(plain_twin.slurm_conf))
    b = ClusterExecutor(tmp_path / "b", queue="cpu", timeout_min=5).submit(abs, -4)
    assert a.watcher is not b.watcher
    assert a.watcher.slurm_conf == twin.env["SLURM_CONF"]
    assert b.watcher.slurm_conf == str(plain_twin.slurm_conf)
    assert (a.result(), b.result()) == (3, 4)
    assert a.watcher.commands[-1][0] == "sacct" and b.watcher.commands[-1][0] == "squeue"


def test_job_state_helper_uses_squeue_without_accounting(plain_twin, tmp_path):
    from toolkit import slurm

    job_id = slurm.sbatch(["--partition=cpu", f"--output={tmp_path}/%j.out", "--wrap=exit 4"])
    deadline = time.monotonic() + 60
    while slurm.job_state(job_id) not in ("FAILED", "COMPLETED") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm.job_state(job_id) == "FAILED"
    assert slurm.job_state("999999") is None
