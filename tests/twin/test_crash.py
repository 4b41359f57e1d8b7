"""A `local up` stopped by a signal, and a controller that dies under jobs.

Each test starts a twin of its own: the first stops `pctk local up` half-way three times (a
kill, SIGTERM, SIGHUP); the second kills slurmctld under a running and a waiting job.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from toolkit.local import procs
from toolkit.local.twin import Twin

pytestmark = pytest.mark.twin

PCTK = str(Path(sys.executable).parent / "pctk")


def _state_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="pctk-c-", dir="/tmp"))


def _ours(state: Path) -> list[int]:
    """Live pids whose command line names the state folder (the twin's daemons do)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] != "Z" and str(state).encode() in cmd:
            found.append(int(entry.name))
    return found


def _config(folder: Path) -> Path:
    cfg = folder / "crash.yaml"
    cfg.write_text(
        "Region: us-east-1\n"
        "Image: {Os: ubuntu2204}\n"
        "HeadNode: {InstanceType: c5.4xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}\n"
        "Scheduling:\n"
        "  Scheduler: slurm\n"
        "  SlurmSettings:\n"  # accounting, so `up` starts MariaDB and slurmdbd too
        "    Database:\n"
        "      Uri: db.example.com:3306\n"
        "      UserName: slurm\n"
        "      PasswordSecretArn: arn:aws:secretsmanager:us-east-1:123456789012:secret:db\n"
        "  SlurmQueues:\n"
        "    - Name: compute\n"
        "      Networking: {SubnetIds: [subnet-0123456789abcdef0]}\n"
        "      ComputeResources:\n"
        "        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 1, MaxCount: 1}\n")
    return cfg


def _started(root: Path) -> list[str]:
    """The daemons `up` has recorded so far in the twin under ``root``."""
    for f in root.glob("*/twin.json"):
        try:
            return [p["name"] for p in json.loads(f.read_text()).get("procs", [])]
        except (OSError, ValueError):
            return []
    return []


def _up_until(root: Path, cfg: Path, daemon: str) -> subprocess.Popen[str]:
    """`pctk local up` in the background, returned once it has started ``daemon``."""
    p = subprocess.Popen([PCTK, "local", "up", "--state-dir", str(root), "-c", str(cfg)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while daemon not in _started(root):
        assert p.poll() is None, p.stdout.read() if p.stdout else ""
        assert time.monotonic() < deadline, f"{daemon} not started"
        time.sleep(0.05)
    return p


def _local(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PCTK, "local", *args, "--state-dir", str(root)], capture_output=True,
                          text=True, timeout=120)


def test_a_signal_during_up_stops_what_was_started_and_status_says_what_is_missing(tmp_path):
    root = _state_dir()
    cfg = _config(tmp_path)
    try:
        # killed outright: nothing can clean up, but status must not call it running
        p = _up_until(root, cfg, "slurmdbd")
        p.kill()
        p.wait()
        st = _local(root, "status")
        assert st.returncode == 1, st.stdout
        assert "degraded" in st.stdout and "never started" in st.stdout, st.stdout
        assert json.loads(_local(root, "status", "--json").stdout)["missing"]
        _local(root, "down")
        assert _ours(root) == []

        for sig, daemon in ((signal.SIGTERM, "slurmdbd"), (signal.SIGHUP, "slurmctld")):
            p = _up_until(root, cfg, daemon)
            p.send_signal(sig)
            out, _ = p.communicate(timeout=60)
            assert p.returncode == 128 + sig, out
            assert "stopping what was started" in out
            assert _ours(root) == [], (sig, out)
            st = _local(root, "status")
            assert st.returncode == 3 and "stopped" in st.stdout, st.stdout
    finally:
        _local(root, "down", "--purge")
    assert _ours(root) == []
    shutil.rmtree(root, ignore_errors=True)  # the root's up lock


def _sbatch(env: dict[str, str], *args: str) -> str:
    r = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True,
                       env=env, timeout=60, check=True)
    return r.stdout.strip().split(";")[0]


def _squeue_state(env: dict[str, str], job: str) -> str:
    r = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True,
                       env=env, timeout=60)
    return r.stdout.strip()


def _until(what: str, check, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_dead_controller_comes_back_with_its_running_jobs_and_pctk_says_what_was_lost(
        tmp_path):
    state = _state_dir()
    twin = Twin(state)
    twin.up("p5-training", nodes=1)
    env = {**os.environ, **twin.env(), "PCTK_HOME": str(tmp_path / "home")}
    saved = state / "ctld" / "state" / "job_state"
    waiter = None
    try:
        before = {d["name"]: d["pid"] for d in twin.status().daemons}
        # a job that holds the GPU node's 8 GPUs, running when slurmctld dies
        running = _sbatch(env, "-p", "gpu", "-N1", "--gpus-per-node=8", "--wrap", "sleep 300")
        _until("job running", lambda: _squeue_state(env, running) == "RUNNING")
        seen_running = time.time()
        _until("state saved", lambda: saved.exists() and saved.stat().st_mtime > seen_running,
               timeout=30)
        state_before = saved.read_bytes()

        # a second job waits behind it, watched by `pctk submit --wait`
        waiter = subprocess.Popen([PCTK, "submit", "--wait", "-q", "gpu", "--", "true"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=env)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(waiter.stdout or []), daemon=True)
        reader.start()
        _until("submitted", lambda: any(ln.startswith("submitted") for ln in lines))
        lost = next(ln for ln in lines if ln.startswith("submitted")).split()[1]

        os.kill(before["slurmctld"], signal.SIGKILL)
        # Slurm saves its state asynchronously: a crash can come before the newest job is
        # saved. Leave the state as such a crash does, without the waiting job.
        saved.write_bytes(state_before)
        (saved.parent / "job_state.old").unlink(missing_ok=True)
        _until("said not answering", lambda: any("not answering" in ln for ln in lines), 40)

        twin.up("p5-training", nodes=1)
        after = {d["name"]: d["pid"] for d in twin.status().daemons}
        assert after["slurmctld"] != before["slurmctld"]
        assert {k: v for k, v in after.items() if k != "slurmctld"} == \
            {k: v for k, v in before.items() if k != "slurmctld"}  # only slurmctld restarted
        assert _squeue_state(env, running) == "RUNNING"

        assert waiter.wait(timeout=60) == 1
        reader.join(timeout=10)
        text = "".join(lines)
        assert f"job {lost} is gone" in text, text

        # the health check's job waits for the GPUs the running job holds, and says so
        r = subprocess.run([PCTK, "health", "run", "--nodes", "gpu-st-p5-1", "--timeout", "3",
                            "--no-store"], capture_output=True, text=True, env=env, timeout=120)
        assert "never started" in r.stdout and "PENDING (Resources)" in r.stdout, r.stdout
        assert "gres/gpu=8 allocated" in r.stdout, r.stdout

        # once the running job ends its GPUs are free: the next 8-GPU job runs
        subprocess.run(["scancel", running], env=env, timeout=60, check=True)
        nxt = _sbatch(env, "-p", "gpu", "-N1", "--gpus-per-node=8", "--wrap", "true")
        _until("next GPU job recorded", lambda: "COMPLETED" in subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", nxt, "-o", "State"], capture_output=True,
            text=True, env=env, timeout=60).stdout)
    finally:
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
        twin.down(purge=True)


def test_down_stops_the_job_steps_of_a_slurmd_stopped_under_them(tmp_path):
    """A slurmd stopped under a running job (a node failure) leaves its slurmstepd and the
    job's processes running, as on a real node; `down` stops them by pid too."""
    state = _state_dir()
    twin = Twin(state)
    twin.up(_config(tmp_path), nodes=1, accounting=False)
    env = {**os.environ, **twin.env()}
    marker = f"pctk-step-{os.getpid()}"
    try:
        job = _sbatch(env, "-p", "compute", "--wrap", f"srun bash -c 'exec -a {marker} sleep 300'")
        _until("job running", lambda: _squeue_state(env, job) == "RUNNING")
        _until("step running", lambda: _named(marker))
        slurmd = next(d for d in twin.status().daemons if d["name"].startswith("slurmd:"))
        os.kill(slurmd["pid"], signal.SIGTERM)
        _until("slurmd gone", lambda: not Path(f"/proc/{slurmd['pid']}").exists()
               or Path(f"/proc/{slurmd['pid']}/stat").read_text().split()[2] == "Z")
        steps = [p.pid for p in procs.left_in(state, "slurmstepd")]
        assert steps and _named(marker), "the job's step should outlive its slurmd"
    finally:
        twin.down(purge=True)
    assert not _named(marker)
    assert not [pid for pid in steps if Path(f"/proc/{pid}").exists()
                and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"]


def _named(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().split(b"\0")[0] == marker.encode():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found
