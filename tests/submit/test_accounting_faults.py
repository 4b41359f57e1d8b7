"""Faults while pctk waits for jobs: accounting dies mid-wait, Slurm requeues a job.

- slurmdbd stopped (by its pid) while ``pctk submit --wait`` or ``job.result()`` waits: the
  watcher falls back to squeue within a poll and returns once the job ends, where it used to
  poll a failing sacct for good.
- a job requeued by ``scontrol requeue``, or after its node failed (that node's slurmd
  stopped by its pid), is followed to the end of its new run: ``--wait`` exits 0 and
  ``job.result()`` returns the new run's value, where a NODE_FAIL seen in sacct for the few
  seconds before the requeue shows used to end the wait.

Runs on a twin of its own (accounting on, 2 nodes per queue) so the shared one keeps its
daemons. Daemons stopped here are restarted here and stopped by their pids at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import submitit

from toolkit import slurm
from toolkit.local import power, procs
from toolkit.local.twin import Twin
from toolkit.submit import ClusterExecutor
from toolkit.submit import watcher as watcher_mod
from toolkit.submit.watcher import PctkWatcher

pytestmark = pytest.mark.twin

# first run: long enough for the node failure to be noticed; the rerun prints its count
RERUN_SCRIPT = 'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 240; fi; ' \
               'echo "run ${SLURM_RESTART_COUNT:-0}"'


@dataclass
class AcctTwin:
    twin: Twin
    restarted: list[procs.Proc] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.twin.state_dir

    def daemon(self, name: str) -> procs.Proc:
        """The live process of a daemon: the one restarted here, else the twin's own."""
        for p in reversed(self.restarted):
            if p.name == name:
                return p
        if name.startswith("slurmd:"):  # a dynamic node's slurmd, started at its power-up
            now = power.recorded_slurmd(self.state, name.split(":", 1)[1])
            if now is not None:
                return now
        recorded = json.loads((self.state / "twin.json").read_text())["procs"]
        return next(procs.Proc.from_json(p) for p in recorded if p["name"] == name)

    def stop(self, name: str) -> None:
        assert procs.stop([self.daemon(name)]) == []

    def restart(self, name: str, argv: list[str]) -> None:
        try:
            running = procs.is_running(self.daemon(name))
        except StopIteration:  # a crashed node's slurmd: its record went with it
            running = False
        if not running:
            self.restarted.append(procs.spawn(
                name, argv, self.state / "log" / f"{name.replace(':', '-')}.restart.out",
                dict(os.environ), self.state))


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60)


def _until(what: str, predicate, timeout: float, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:g}s")


def _recorded_runs(job_id: str, want: list[str], timeout: float) -> list[str]:
    """The states accounting holds for each run of ``job_id``, once they are ``want`` or after
    ``timeout``: slurmctld hands job records to slurmdbd as it can, and on a busy host the end
    of a run reaches accounting seconds after the controller has it."""
    deadline = time.monotonic() + timeout
    while True:
        runs = _run("sacct", "-D", "-X", "-n", "-P", "-j", job_id, "-o", "State").stdout.split()
        if runs == want or time.monotonic() > deadline:
            return runs
        time.sleep(0.5)


def _sacct_works() -> bool:
    ok = _run("sacct", "-n", "-X", "-o", "JobID").returncode == 0
    if ok:
        watcher_mod.note_sacct(None, True)  # a sacct caller reports how it went
    return ok


def _running_on(name: str) -> tuple[str, str] | None:
    """(job id, node) of the job called ``name`` once it runs."""
    r = _run("squeue", "-h", "-n", name, "-o", "%i|%T|%N")
    rows = [line.split("|") for line in r.stdout.split()]
    return (rows[0][0], rows[0][2]) if rows and rows[0][1] == "RUNNING" else None


def _left_behind(slurm_conf: str) -> list[procs.Proc]:
    """This twin's processes that outlived it: the steps on the node whose slurmd was
    stopped (slurmstepd and the job under it), found by the twin's own SLURM_CONF."""
    mine = f"SLURM_CONF={slurm_conf}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mine in env:
            found.append(procs.Proc("left", int(d.name), procs.start_ticks(int(d.name)), ""))
    return found


@pytest.fixture(scope="module")
def acct() -> Iterator[AcctTwin]:
    state = Path(tempfile.mkdtemp(prefix="pctk-af-", dir="/tmp"))
    twin = Twin(state)
    mp = pytest.MonkeyPatch()
    handle = AcctTwin(twin)
    try:
        twin.up("p5-training", nodes=2, accounting=True)
        for k, v in twin.env().items():
            mp.setenv(k, v)
        yield handle
    finally:
        mp.undo()
        procs.stop(handle.restarted)
        twin.down(purge=True)
        procs.stop(_left_behind(str(twin.slurm_conf)), timeout=3)


@pytest.fixture()
def dbd_up(acct: AcctTwin, tmp_path: Path, monkeypatch) -> AcctTwin:
    """slurmdbd running and sacct answering at the start of the test."""
    monkeypatch.setenv("PCTK_JOBS_DIR", str(tmp_path / "jobs"))
    acct.restart("slurmdbd", ["slurmdbd", "-D"])
    _until("sacct answers", _sacct_works, 60)
    return acct


def _pctk_wait(name: str, *command: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "toolkit.cli", "submit", "-q", "cpu",
                             "--wait", "--json", "-J", name, "--", *command],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(cli: subprocess.Popen[str], timeout: float) -> tuple[int, str, str]:
    try:
        out, err = cli.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        cli.kill()
        out, err = cli.communicate()
        raise AssertionError(
            f"pctk submit --wait still waiting after {timeout:g}s: {err}") from None
    return cli.returncode, out, err


def test_submit_wait_returns_when_slurmdbd_dies_mid_wait(dbd_up):
    cli = _pctk_wait("acct-wait", "sleep", "10")
    try:
        job_id, _ = _until("job runs", lambda: _running_on("acct-wait"), 60)
        time.sleep(3)  # the waiter has polled sacct at least once
        dbd_up.stop("slurmdbd")
        assert _run("sacct", "-n", "-X", "-j", job_id).returncode != 0
        # the launchers' one-question helper falls back at once, too
        assert slurm.job_state(job_id) in ("RUNNING", "COMPLETING", "COMPLETED")
        t0 = time.monotonic()
        # the job ends about 7 s from now; then one failed sacct poll, one squeue poll (2 s)
        code, out, err = _finish(cli, 40)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert code == 0, err
    assert json.loads(out)["states"] == {job_id: "COMPLETED"}
    assert time.monotonic() - t0 < 25


def test_result_of_a_cancelled_job_when_slurmdbd_dies(dbd_up, tmp_path):
    job = ClusterExecutor(tmp_path, queue="cpu", timeout_min=5).submit(time.sleep, 300)
    _until("job runs", lambda: job.get_info(mode="force").get("State") == "RUNNING", 60)
    assert job.watcher.commands[-1][0] == "sacct"
    dbd_up.stop("slurmdbd")
    _run("scancel", job.job_id)
    t0 = time.monotonic()
    # result() blocks until done(): bounded here so a hang fails instead of stalling
    _until("job seen as ended", job.done, 45, every=1)
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
    # the watcher's delay (10 s): a failed sacct poll, then squeue, plus Slurm's kill time
    assert time.monotonic() - t0 < 35
    assert job.state.startswith("CANCELLED")
    after = [cmd[0] for cmd in job.watcher.commands]
    assert "squeue" in after[after.index("sacct"):]


def test_scontrol_requeue_is_followed_to_the_new_run(dbd_up):
    cli = _pctk_wait("acct-requeue", "bash", "-c", RERUN_SCRIPT)
    try:
        job_id, _ = _until("job runs", lambda: _running_on("acct-requeue"), 60)
        # the watcher names a requeue it saw: a run then a pending job again. It polls every
        # 5 s plus the sacct call (seconds on a loaded 2-core machine), so give it two polls
        # of the running job before requeueing (the first run sleeps 240 s)
        time.sleep(15)
        assert _run("scontrol", "requeue", job_id).returncode == 0
        # the twin restarts a requeued job after 10-30 s
        code, out, err = _finish(cli, 120)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert code == 0, err
    assert json.loads(out)["states"] == {job_id: "COMPLETED"}
    assert f"job {job_id} was requeued by Slurm; waiting for its new run" in err, err
    assert f"job {job_id} ran more than once: Slurm requeued it and its last run ended " \
        "COMPLETED" in err, err
    logs = "".join(p.read_text() for p in (Path(os.environ["PCTK_JOBS_DIR"])).rglob(
        f"{job_id}.*.out"))
    assert "run 1" in logs


# slurmctld's background checks (PERIODIC_TIMEOUT in its source): the pass that ends a job's
# CONFIGURING once its powered-up node answers, among others
SLURMCTLD_PERIODIC_S = 30
# what a loaded host adds to the Slurm clocks below: RPCs, daemon and process starts
HOST_LATENCY_S = 60


def _node_failure_rerun_bound_s() -> int:
    """How long a job on a node that dies takes to run again elsewhere, from the twin's own
    settings: slurmctld pings every SlurmdTimeout/3 and marks the node DOWN after SlurmdTimeout
    without an answer; the requeued job waits cred_expire + 1 s (BeginTime); the next pass of
    the main scheduler (sched_interval) or of backfill starts it on the powered-down spare,
    which has ResumeTimeout to boot; a periodic pass ends CONFIGURING; the new run is quick."""
    conf = slurm.slurm_config()

    def seconds(key: str) -> int:
        return int(conf[key].split()[0])

    params = dict(p.split("=", 1) for p in conf.get("SchedulerParameters", "").split(",")
                  if "=" in p)
    cred = dict(p.split("=", 1) for p in conf["AuthInfo"].split(",") if "=" in p)
    slurmd_timeout = seconds("SlurmdTimeout")
    return (slurmd_timeout + slurmd_timeout // 3 + SLURMCTLD_PERIODIC_S
            + int(cred.get("cred_expire", 120)) + 1
            + int(params.get("sched_interval", 60))
            + seconds("ResumeTimeout") + SLURMCTLD_PERIODIC_S + HOST_LATENCY_S)


def _controller_view() -> str:
    """What slurmctld says of the jobs and nodes, for a failure's message."""
    return (_run("squeue", "-h", "-o", "%i %T %r %N %S").stdout
            + _run("sinfo", "-h", "-N", "-o", "%N %T %E").stdout)


def test_node_failure_requeue_is_followed_and_the_new_run_returns(dbd_up, tmp_path):
    acct = dbd_up
    node, spare = "cpu-dy-c5-1", "cpu-dy-c5-2"
    # both jobs start on `node`: the spare waits drained until the node has failed
    assert _run("scontrol", "update", f"NodeName={spare}", "State=DRAIN",
                "Reason=test: spare").returncode == 0
    ex = ClusterExecutor(tmp_path / "fn", queue="cpu", timeout_min=10)
    job = ex.submit(subprocess.check_output, ["bash", "-c", RERUN_SCRIPT], text=True)
    cli = _pctk_wait("acct-nodefail", "bash", "-c", RERUN_SCRIPT)
    try:
        cli_job, where = _until("command job runs", lambda: _running_on("acct-nodefail"), 60)
        _until("function job runs",
               lambda: job.get_info(mode="force").get("State") == "RUNNING", 60)
        assert where == node and job.get_info(mode="cache")["NodeList"] == node
        watcher = PctkWatcher(delay_s=1)
        for j in (job.job_id, cli_job):
            watcher.register_job(j)
        # the node fails as a machine does: slurmd, steps and tasks at once (with slurmd
        # alone stopped, the steps run on, the first to end reports to slurmctld, and Slurm
        # 24.11 applies that end to the job it has just requeued)
        assert power.crash_node(acct.state, node, acct.daemon(f"slurmd:{node}")) > 2
        assert _run("scontrol", "update", f"NodeName={spare}", "State=RESUME").returncode == 0

        # poll fast through the node failure and the requeue: done only at the end of the
        # new run, never at the NODE_FAIL in between. Bounded by the Slurm clocks it waits on
        seen: list[str] = []
        deadline = time.monotonic() + _node_failure_rerun_bound_s()
        while not all(watcher.is_done(j, mode="cache") for j in (job.job_id, cli_job)):
            assert time.monotonic() < deadline, (seen[-5:], _controller_view())
            watcher.update()
            seen.append(" ".join(watcher.get_state(j, mode="cache")
                                 for j in (job.job_id, cli_job)))
            # the launchers' helper (sacct, then the controller for NODE_FAIL) agrees
            helper = slurm.job_state(job.job_id) or ""
            assert helper == "COMPLETED" or not helper.startswith(slurm.TERMINAL), seen[-3:]
            time.sleep(0.5)
        changes = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
        assert {watcher.get_state(j, mode="cache") for j in (job.job_id, cli_job)} == \
            {"COMPLETED"}, (changes, [c[0] for c in watcher.commands[-6:]])
        assert set(watcher.requeued) == {job.job_id, cli_job}
        for j in (job.job_id, cli_job):  # the earlier run ended in a node failure
            runs = _recorded_runs(j, ["NODE_FAIL", "COMPLETED"], 30)
            assert runs == ["NODE_FAIL", "COMPLETED"], (j, runs)

        _until("function job done", job.done, 30, every=1)
        assert job.result() == "run 1\n"
        code, out, err = _finish(cli, 30)
        assert code == 0, err
        assert json.loads(out)["states"] == {cli_job: "COMPLETED"}
        assert f"job {cli_job} was requeued by Slurm" in err, err
        # the user is told the job ran twice, why, and how to prevent it
        assert f"job {cli_job} ran more than once: Slurm requeued it" in err, err
        assert "--no-requeue" in err, err
    finally:
        if cli.poll() is None:
            cli.kill()
        _run("scontrol", "update", f"NodeName={spare}", "State=RESUME")
        acct.restart(f"slurmd:{node}", ["slurmd", "-D", "-N", node, "-f",
                                        os.environ["SLURM_CONF"]])
