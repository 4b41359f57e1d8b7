"""Power saving, capacity faults and static node replacement, as ParallelCluster does them.

A twin of its own: queue `cpu` with one static and three dynamic c5 nodes, ScaledownIdletime
1 minute (SuspendTime 10 s on the twin's clock), boot delay 4 s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.twinutil import TwinHandle
from toolkit import slurm
from toolkit.local import capacity, power, replace
from toolkit.local.twin import Twin

pytestmark = pytest.mark.twin

BOOT = 4.0
DYNAMIC = ["cpu-dy-c5-1", "cpu-dy-c5-2", "cpu-dy-c5-3"]
STATIC = "cpu-st-c5-1"
CONFIG = """\
Region: us-east-1
Image: {Os: ubuntu2204}
HeadNode: {InstanceType: c5.4xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}
Scheduling:
  Scheduler: slurm
  SlurmSettings:
    ScaledownIdletime: 1
    Database:
      Uri: db.example.com:3306
      UserName: slurm
      PasswordSecretArn: arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdb
  SlurmQueues:
    - Name: cpu
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      ComputeResources:
        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 1, MaxCount: 4}
"""


@pytest.fixture(scope="module")
def ptwin() -> Iterator[TwinHandle]:
    state = Path(tempfile.mkdtemp(prefix="pctk-pw-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="pctk-pwjobs-", dir="/tmp"))
    cfg = work / "powered.yaml"
    cfg.write_text(CONFIG)
    t = Twin(state)
    t.up(cfg, boot_delay=BOOT)
    try:
        yield TwinHandle(twin=t, env={**os.environ, **t.env()}, workdir=work, config=str(cfg))
    finally:
        t.down(purge=True)
        shutil.rmtree(work, ignore_errors=True)


def _nodes(h: TwinHandle) -> dict[str, tuple[str, str]]:
    out = h.cmd("sinfo", "-h", "-N", "-o", "%N|%T|%E").stdout
    rows = [line.split("|", 2) for line in out.splitlines()]
    return {r[0]: (r[1], "" if r[2] == "none" else r[2]) for r in rows}


def _squeue(h: TwinHandle, job: str) -> tuple[str, str]:
    out = h.cmd("squeue", "-h", "-j", job, "-o", "%T|%r", check=False).stdout.strip()
    state, _, reason = out.partition("|")
    return state, reason


def _until(what: str, check, timeout: float = 90, every: float = 0.5, explain=None):
    """``explain``: called on a timeout, its text ends the failure message."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            more = f": {explain()}" if explain else ""
            raise AssertionError(f"not {what} after {timeout:.0f}s{more}")
        time.sleep(every)


def _job_and_nodes(h: TwinHandle, job: str):
    """What Slurm says of a job that is slow to finish, and of the nodes."""
    return lambda: (f"squeue {_squeue(h, job)}; nodes {_nodes(h)}; "
                    + h.cmd("scontrol", "show", "job", job, check=False).stdout.strip())


def _powered_down(h: TwinHandle, nodes: list[str]) -> bool:
    states = _nodes(h)
    return all(states[n][0] == "idle~" for n in nodes)


def test_dynamic_nodes_start_powered_down_and_static_ones_up(ptwin):
    states = _nodes(ptwin)
    assert states[STATIC] == ("idle", "")
    assert all(states[n] == ("idle~", "") for n in DYNAMIC), states
    running = {d["name"] for d in ptwin.twin.status().daemons if d["running"]}
    assert f"slurmd:{STATIC}" in running and not any(f"slurmd:{n}" in running for n in DYNAMIC)
    conf = (ptwin.state_dir / "etc" / "slurm.conf").read_text()
    assert "\nSuspendExcNodes=cpu-st-c5-1\n" in conf and "\nSuspendTime=10\n" in conf


def test_a_job_waits_for_the_boot_then_runs_and_the_nodes_power_down_when_idle(ptwin):
    t0 = time.monotonic()
    job, _ = ptwin.sbatch("srun hostname", "--partition=cpu", "--nodes=3",
                            "--exclude=" + STATIC)
    seen: set[str] = set()

    def started() -> bool:
        seen.update(s for n, (s, _) in _nodes(ptwin).items() if n in DYNAMIC)
        # squeue: CONFIGURING while its nodes boot (sacct says RUNNING already)
        state = _squeue(ptwin, job)[0]
        return state == "RUNNING" or (not state and ptwin.state(job) == "COMPLETED")
    _until("started", started, timeout=120)
    assert time.monotonic() - t0 >= BOOT
    # powering up as users see it on ParallelCluster: alloc# (or mix# on a partial node)
    assert seen & {"allocated#", "mixed#"}, seen
    assert ptwin.wait(job) == "COMPLETED"
    events = [e for e in json.loads(_status_json(ptwin))["power_events"]
              if e["node"] in DYNAMIC]
    assert {e["event"] for e in events} >= {"power-up", "slurmd started"}
    # SuspendTime (10 s) of idleness, then the suspend program and SuspendTimeout (20 s)
    _until("powered down", lambda: _powered_down(ptwin, DYNAMIC), timeout=120, every=1)
    running = {d["name"] for d in ptwin.twin.status().daemons}
    assert not any(f"slurmd:{n}" in running for n in DYNAMIC)
    assert _nodes(ptwin)[STATIC] == ("idle", "")  # SuspendExcNodes: never powered down


def _status_json(h: TwinHandle) -> str:
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "status", "--json",
                        "--state-dir", str(h.state_dir)], capture_output=True, text=True,
                       env=h.env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_ice_fails_the_power_up_keeps_the_job_pending_then_recovers(ptwin):
    _until("powered down", lambda: _powered_down(ptwin, DYNAMIC), timeout=120, every=1)
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "fault", "ice", "cpu/c5",
                        "--timeout", "6", "--state-dir", str(ptwin.state_dir)],
                       capture_output=True, text=True, env=ptwin.env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert capacity.armed(ptwin.state_dir) == ["cpu/c5"]
    assert list(json.loads(_status_json(ptwin))["faults"]["ice"]) == ["cpu/c5"]
    job, _ = ptwin.sbatch("srun hostname", "--partition=cpu", "--nodes=2",
                          "--exclude=" + STATIC)

    def failed() -> bool:
        return any(capacity.FAILED_REASON in reason for _, reason in _nodes(ptwin).values())
    _until("failed", failed, timeout=60)
    states = _nodes(ptwin)
    down = {n: s for n, s in states.items() if n in DYNAMIC and s[0].startswith("down")}
    assert down and all("(Code:InsufficientInstanceCapacity)" in r for _, r in down.values())
    assert capacity.armed(ptwin.state_dir) == []  # the fault was used up
    state, reason = _squeue(ptwin, job)
    assert state == "PENDING", (state, reason)
    # then the nodes power down again (down~ -> idle~) and the job launches and completes;
    # sacct shows the failed launch as NODE_FAIL while Slurm requeues the job: ask squeue
    _until("finished", lambda: not _squeue(ptwin, job)[0], timeout=180, every=1,
           explain=_job_and_nodes(ptwin, job))
    _until("completed", lambda: ptwin.state(job) == "COMPLETED", timeout=30)
    events = [e["event"] for e in power.events(ptwin.state_dir, limit=500)]
    assert "power-up failed" in events and "capacity back" in events


def test_an_unknown_compute_resource_is_one_line(ptwin):
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "fault", "ice", "gpu/p5",
                        "--state-dir", str(ptwin.state_dir)],
                       capture_output=True, text=True, env=ptwin.env, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no compute resource 'gpu/p5'" in r.stderr and "cpu/c5" in r.stderr


def test_a_replaced_static_nodes_job_is_requeued_and_completes(ptwin):
    marker = ptwin.workdir / "runs.txt"
    # the first run lasts until the replacement ends it, and ignores the SIGTERM Slurm sends
    # the requeued job (as clustermgtd sets the node DOWN before terminating the instance, a
    # real job gets that SIGTERM too and may write on): only the instance's end stops it, all
    # its processes at once, so "end" from the first run means it went on after its node was
    # gone. The requeued run ends at once.
    job, out = ptwin.sbatch(f"echo run >> {marker}; [ \"${{SLURM_RESTART_COUNT:-0}}\" = 0 ] && "
                            f"{{ trap '' TERM; sleep 150; }}; echo end >> {marker}; echo done",
                            "--partition=cpu", f"--nodelist={STATIC}", "--requeue")
    _until("running", lambda: ptwin.state(job) == "RUNNING", timeout=60)
    _until("started", lambda: marker.exists(), timeout=30)
    old = next(d["pid"] for d in ptwin.twin.status().daemons if d["name"] == f"slurmd:{STATIC}")
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "replace", STATIC,
                        "--state-dir", str(ptwin.state_dir)],
                       capture_output=True, text=True, env=ptwin.env, timeout=120)
    assert r.returncode == 0, r.stderr
    state, reason = _nodes(ptwin)[STATIC]
    assert state.startswith("down") and reason.startswith(replace.REASON)
    # returns after the boot delay with a new slurmd; the job runs again and completes
    _until("back", lambda: _nodes(ptwin)[STATIC][0] in ("idle", "mixed", "allocated"),
           timeout=60, explain=_job_and_nodes(ptwin, job))
    # sacct may show the lost run as NODE_FAIL while Slurm requeues the job: ask squeue
    _until("finished", lambda: not _squeue(ptwin, job)[0], timeout=120, every=1,
           explain=_job_and_nodes(ptwin, job))
    _until("completed", lambda: ptwin.state(job) == "COMPLETED", timeout=30)
    # the terminated instance took the first run with it: only the second one ended
    assert marker.read_text().split() == ["run", "run", "end"]
    assert "done" in out.read_text()
    st = ptwin.twin.status()
    new = next(d for d in st.daemons if d["name"] == f"slurmd:{STATIC}")
    assert new["pid"] != old and new["running"] and st.state == "running"
    table = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "status",
                            "--state-dir", str(ptwin.state_dir)], capture_output=True,
                           text=True, env={**ptwin.env, "COLUMNS": "200"}, timeout=120)
    assert table.returncode == 0, table.stderr
    assert "power events" in table.stdout
    assert "replacing" in table.stdout and "relaunched" in table.stdout


def test_a_replacement_that_registers_late_is_resumed_after_it_registers(ptwin, tmp_path):
    """The new instance's slurmd registers 4 s after it was started (a loaded host, a slow
    boot). Resumed before that, the node would go DOWN "Node unexpectedly rebooted" for
    good; the relaunch waits for the registration instead."""
    _until("idle", lambda: _nodes(ptwin)[STATIC][0] == "idle", timeout=60)
    slow = tmp_path / "bin"
    slow.mkdir()
    real = shutil.which("slurmd", path=ptwin.env.get("PATH"))
    assert real
    (slow / "slurmd").write_text(f'#!/bin/sh\nsleep 4\nexec {real} "$@"\n')
    (slow / "slurmd").chmod(0o755)
    assert ptwin.cmd("scontrol", "update", f"NodeName={STATIC}", "State=DOWN",
                     f"Reason={replace.REASON}").returncode == 0
    power.stop_slurmd(ptwin.state_dir, STATIC)
    env = {**power.env_of(power.load_config(ptwin.state_dir)),
           "PATH": f"{slow}:{ptwin.env['PATH']}"}
    t0 = time.time()
    replace.relaunch(ptwin.state_dir, [STATIC], env)
    # idle* until slurmctld's next ping of the node, then idle
    _until("idle", lambda: _nodes(ptwin)[STATIC] == ("idle", ""), timeout=60,
           explain=lambda: str(_nodes(ptwin)[STATIC]))
    assert slurm.slurmd_start_times([STATIC], env=ptwin.env)[STATIC] >= int(t0) + 4


def test_a_relaunched_node_that_slurm_still_calls_unexpectedly_rebooted_is_resumed(ptwin):
    """After the resume, the node registers again and slurmctld may compute its boot time a
    second later (its clock minus the reported uptime): the node goes DOWN "Node unexpectedly
    rebooted", a boot the relaunch itself ordered. The relaunch's watch resumes it."""
    _until("idle", lambda: _nodes(ptwin)[STATIC][0] == "idle", timeout=60)
    assert ptwin.cmd("scontrol", "update", f"NodeName={STATIC}", "State=DOWN",
                     f"Reason={replace.UNEXPECTED_REBOOT}").returncode == 0
    assert _nodes(ptwin)[STATIC] == ("down", replace.UNEXPECTED_REBOOT)
    replace._keep_resumed(ptwin.state_dir, {STATIC: 1}, ptwin.env)
    _until("idle", lambda: _nodes(ptwin)[STATIC] == ("idle", ""), timeout=60,
           explain=lambda: str(_nodes(ptwin)[STATIC]))
    ev = [e for e in power.events(ptwin.state_dir, limit=50) if e["node"] == STATIC]
    assert ev[-1]["event"] == "resumed again" and replace.UNEXPECTED_REBOOT in ev[-1]["detail"]


def test_a_dynamic_node_is_not_replaced(ptwin):
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "replace", DYNAMIC[0],
                        "--state-dir", str(ptwin.state_dir)],
                       capture_output=True, text=True, env=ptwin.env, timeout=120)
    assert r.returncode == 2 and "dynamic node" in r.stderr


def test_down_stops_powered_up_nodes_too(tmp_path):
    cfg = tmp_path / "small.yaml"
    cfg.write_text(CONFIG.replace("MaxCount: 4", "MaxCount: 2"))
    state = Path(tempfile.mkdtemp(prefix="pctk-pwd-", dir="/tmp"))
    t = Twin(state)
    try:
        t.up(cfg, boot_delay=0.5, accounting=False)
        t.power_up(["cpu-dy-c5-1"])
        pids = [d["pid"] for d in t.status().daemons if d["name"] == "slurmd:cpu-dy-c5-1"]
        assert pids
        stopped = t.down()
        assert "slurmd:cpu-dy-c5-1" in stopped
        assert _exited(pids[0])
    finally:
        t.down(purge=True)


def _exited(pid: int, timeout: float = 15.0) -> bool:
    """Gone, or a zombie its parent has not reaped yet (it has exited either way)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return True
        time.sleep(0.2)
    return False


def test_slow_nodes_skips_powered_down_nodes_or_powers_them_up_on_request(ptwin, tmp_path):
    # a dynamic node is powered down between jobs: slow-nodes skips it (no FAIL) and says so,
    # as health run does; --include-powered-down powers it up and sweeps it
    pctk = str(Path(sys.executable).parent / "pctk")
    _until("dynamic nodes powered down", lambda: _powered_down(ptwin, DYNAMIC), timeout=120)
    base = [pctk, "health", "slow-nodes", "--nodes", f"{STATIC},cpu-dy-c5-1", "--size", "1M",
            "--iters", "2", "--timeout", "120", "--workdir", str(tmp_path)]
    r = subprocess.run(base, capture_output=True, text=True, env=ptwin.env, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "cpu-dy-c5-1" in r.stderr, r.stderr
    assert "--include-powered-down" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([*base, "--include-powered-down", "--json"], capture_output=True,
                       text=True, env=ptwin.env, timeout=600)
    res = json.loads(r.stdout)
    assert {v["node"]: v["verdict"] for v in res["verdicts"]} == {
        STATIC: "OK", "cpu-dy-c5-1": "OK"}, r.stderr
    assert r.returncode == 0 and res["skipped"] == {}
    assert "stored slow-nodes result" in r.stderr, r.stderr  # kept in the results history
