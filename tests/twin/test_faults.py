"""`pctk local fault`: real tc shaping and a real cgroup cpu quota on one twin node."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.twinutil import TwinHandle
from toolkit.local import faults, power, procs, state

PCTK = str(Path(sys.executable).parent / "pctk")


@pytest.fixture
def faulty(twin: TwinHandle) -> Iterator[TwinHandle]:
    """The session twin; every fault is cleared afterwards, even when the test fails."""
    yield twin
    faults.clear(twin.state_dir)


def _pctk(twin: TwinHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PCTK, "local", *args, "--state-dir", str(twin.state_dir)],
                          capture_output=True, text=True, env=twin.env, timeout=60)


def _throughput(addr: str, mib: int, seconds: float = 4.0) -> float:
    """MB/s of one TCP stream from this process to a listener on ``addr`` (up to ``mib``)."""
    srv = socket.socket()
    srv.bind((addr, 0))
    srv.listen(1)
    got = [0]

    def serve() -> None:
        c, _ = srv.accept()
        while (b := c.recv(1 << 20)):
            got[0] += len(b)
        c.close()

    t = threading.Thread(target=serve)
    t.start()
    c = socket.create_connection((addr, srv.getsockname()[1]))
    data = b"x" * (1 << 20)
    t0 = time.monotonic()
    for _ in range(mib):
        c.sendall(data)
        if time.monotonic() - t0 > seconds:
            break
    c.close()
    t.join()
    srv.close()
    return got[0] / 1e6 / (time.monotonic() - t0)


def test_slow_net_shapes_only_that_nodes_address_and_clear_removes_it(faulty):
    addrs = faults.node_addresses(faulty.state_dir)
    slow, other = addrs["cpu-dy-c5-2"], addrs["cpu-dy-c5-3"]
    assert slow != other and "127.0.0.1" not in (slow, other)
    r = _pctk(faulty, "fault", "slow-net", "cpu-dy-c5-2", "--rate", "40mbit", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["addr"] == slow
    shaped, neighbour = _throughput(slow, 40), _throughput(other, 400)
    # 40 mbit/s = 5 MB/s (htb lets a burst through first); the neighbour runs at memory speed
    assert shaped < 10, (shaped, neighbour)
    assert neighbour > 10 * shaped, (shaped, neighbour)
    filters = subprocess.run(["tc", "filter", "show", "dev", "lo"], capture_output=True,
                             text=True).stdout
    # only the faulty node's address among this twin's (another twin on the host, such as the
    # other Slurm release's leg, may shape one of its own on lo at the same time)
    assert {n for n, a in addrs.items() if _tc_match(a) in filters} == {"cpu-dy-c5-2"}, filters
    st = json.loads(_pctk(faulty, "status", "--json").stdout)
    assert st["faults"]["slow-net"]["node"] == "cpu-dy-c5-2"
    r = _pctk(faulty, "fault", "clear")
    assert r.returncode == 0 and "slow-net" in r.stdout
    assert _tc_match(slow) not in subprocess.run(["tc", "filter", "show", "dev", "lo"],
                                                 capture_output=True, text=True).stdout
    assert _throughput(slow, 400) > 10 * shaped
    assert json.loads(_pctk(faulty, "status", "--json").stdout)["faults"] == {}


def _tc_match(addr: str) -> str:
    """How `tc filter show` prints a u32 match on this destination address."""
    return f"match {''.join(f'{int(o):02x}' for o in addr.split('.'))}/ffffffff at 16"


# two seconds of a busy loop; prints the node, the CPU seconds it got, the wall seconds and
# the task's cgroups (one line, ';'-joined)
_SPIN = ("python3 -c 'import os,time\nt=time.time();c=time.process_time()\n"
         "while time.time()-t<2: pass\n"
         "print(os.environ[\"SLURMD_NODENAME\"], time.process_time()-c, time.time()-t, "
         "\";\".join(open(\"/proc/self/cgroup\").read().split()))'")


def _cpu_cgroup(line: str) -> str:
    """The cpu controller's group in a ';'-joined /proc/<pid>/cgroup (v1 or v2)."""
    groups = {}
    for entry in line.split(";"):
        _, controllers, path = entry.split(":", 2)
        for c in controllers.split(","):
            groups[c] = path
    # cgroup v1's cpu hierarchy where there is one, else the v2 unified one ("0::/path")
    return groups.get("cpu", groups.get(""))


def _nr_throttled(group: Path) -> int:
    stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return int(stat["nr_throttled"])


def test_slow_cpu_throttles_that_nodes_jobs_only(faulty):
    # The quota itself is measured: the CPU seconds the slow node's task gets per wall second,
    # and the kernel's count of throttled periods. A free neighbour's loop is no yardstick on a
    # busy host, where it may get little more than the quota itself.
    r = _pctk(faulty, "fault", "slow-cpu", "cpu-dy-c5-1", "--cpus", "0.05", "--json")
    assert r.returncode == 0, r.stderr
    fault = json.loads(r.stdout)
    group = Path(fault["cgroup"])
    throttled_before = _nr_throttled(group)
    state, out = faulty.run(f"srun {_SPIN}", "--nodes=2", "--ntasks-per-node=1",
                            "--partition=cpu", "--nodelist=cpu-dy-c5-[1-2]")
    assert state == "COMPLETED", out
    runs = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith("cpu-dy-c5-")}
    assert set(runs) == {"cpu-dy-c5-1", "cpu-dy-c5-2"}, out
    name = "/" + group.name
    # the slow node's task was born in the fault's group; the other node's was not
    assert _cpu_cgroup(runs["cpu-dy-c5-1"][3]).endswith(name), runs
    assert not _cpu_cgroup(runs["cpu-dy-c5-2"][3]).endswith(name), runs
    cpu_s, wall_s = float(runs["cpu-dy-c5-1"][1]), float(runs["cpu-dy-c5-1"][2])
    # 0.05 CPU: a twentieth of the wall time. The kernel notices a spent quota at its next
    # tick and takes the overrun from the next period's quota: allow two periods in all
    assert cpu_s <= 0.05 * wall_s + 2 * fault["period_us"] / 1e6, runs
    assert _nr_throttled(group) > throttled_before
    assert "slow-cpu" in _pctk(faulty, "fault", "clear").stdout


def _job_procs(job_id: str) -> dict[int, int]:
    """pid -> parent pid of the job's task processes (``sleep``), found by their environment."""
    out = {}
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and (d / "comm").read_text().strip() == "sleep" and \
                    f"SLURM_JOB_ID={job_id}".encode() in (d / "environ").read_bytes().split(b"\0"):
                out[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    return out


def test_slow_cpu_moves_the_jobs_already_running_on_that_node_in(faulty):
    # slurmstepd daemonizes: a job's processes are not the slurmd's descendants, and a fault
    # set mid-run (a node that turns slow during training) used to leave them at full speed
    jobs = {}
    for node in ("cpu-dy-c5-1", "cpu-dy-c5-2"):
        jobs[node], _ = faulty.sbatch("srun sleep 120", "--partition=cpu", f"--nodelist={node}")
    try:
        deadline = time.monotonic() + 60
        while not all(_job_procs(j) for j in jobs.values()):
            assert time.monotonic() < deadline, {n: faulty.state(j) for n, j in jobs.items()}
            time.sleep(0.2)
        fault = faults.slow_cpu(faulty.state_dir, "cpu-dy-c5-1", 0.5)
        members = {int(x) for x in (Path(fault["cgroup"]) / "cgroup.procs").read_text().split()}
        slow, other = _job_procs(jobs["cpu-dy-c5-1"]), _job_procs(jobs["cpu-dy-c5-2"])
        assert set(slow) <= members and set(slow.values()) <= members  # its tasks and stepd
        assert not (set(other) | set(other.values())) & members
        faults.clear(faulty.state_dir)
        assert not Path(fault["cgroup"]).exists()  # everything moved back out
    finally:
        for j in jobs.values():
            faulty.cmd("scancel", j, check=False)


def test_slow_cpu_stays_with_the_node_when_its_slurmd_starts_again(faulty):
    node = "cpu-dy-c5-2"
    fault = faults.slow_cpu(faulty.state_dir, node, 0.5)
    old = power.recorded_slurmd(faulty.state_dir, node) or _twin_slurmd(faulty, node)
    os.kill(old.pid, signal.SIGTERM)  # as a power-down or a replacement stops it
    deadline = time.monotonic() + 30
    while procs.is_running(old) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not procs.is_running(old)
    new = power.start_slurmd(faulty.state_dir, node, faulty.env, faulty.twin.slurm_conf)
    members = (Path(fault["cgroup"]) / "cgroup.procs").read_text().split()
    assert str(new.pid) in members and str(old.pid) not in members
    # the node answers again before the next test: the new slurmd registers, and slurmctld
    # drops the "*" (not responding) and a "completing" left by a job the old one was ending
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = faulty.cmd("sinfo", "-h", "-n", node, "-o", "%T").stdout.strip()
        if st.startswith(("idle", "mixed", "allocated")) and not st.endswith("*"):
            break
        time.sleep(1)
    assert st.startswith(("idle", "mixed", "allocated")) and not st.endswith("*"), st


def _twin_slurmd(twin: TwinHandle, node: str) -> procs.Proc:
    st = state.load(twin.state_dir)
    assert st is not None
    return next(p for p in st.procs if p.name == f"slurmd:{node}")


def test_bad_fault_input_is_one_line_and_exit_2(faulty):
    r = _pctk(faulty, "fault", "slow-net", "no-such-node")
    assert r.returncode == 2 and "no-such-node is not a node" in r.stderr
    assert "Traceback" not in r.stderr
    r = _pctk(faulty, "fault", "slow-net", "cpu-dy-c5-1", "--rate", "fast")
    assert r.returncode == 2 and "is not a tc rate" in r.stderr
    assert faults.active(faulty.state_dir) == {}


def test_tc_support_names_what_the_kernel_offers():
    line = faults.tc_support_line()
    assert "htb" in line.split(";")[0]  # this kernel offers htb (and u32)


def test_local_down_removes_every_fault():
    import tempfile

    from toolkit.local.twin import Twin

    t = Twin(Path(tempfile.mkdtemp(prefix="pctk-fdown-", dir="/tmp")))
    try:
        t.up("p5-training", nodes=1, accounting=False)
        net = faults.slow_net(t.state_dir, "cpu-dy-c5-1", "10mbit")
        cpu = faults.slow_cpu(t.state_dir, "gpu-st-p5-1", 0.5)
        assert Path(cpu["cgroup"]).is_dir()
        assert net["classid"] in subprocess.run(["tc", "class", "show", "dev", "lo"],
                                                capture_output=True, text=True).stdout
        t.down()
        assert faults.active(t.state_dir) == {}
        assert not Path(cpu["cgroup"]).exists()
        assert net["classid"] not in subprocess.run(["tc", "class", "show", "dev", "lo"],
                                                    capture_output=True, text=True).stdout
    finally:
        faults.clear(t.state_dir)
        t.down(purge=True)


def test_clear_without_a_twin_says_so_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "no-twins"
    r = subprocess.run([PCTK, "local", "fault", "clear", "--state-dir", str(missing)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "no faults were active", r.stderr
    assert not missing.exists()
