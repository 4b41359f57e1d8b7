"""Starting, recovering and stopping twins: exactly our processes, nothing left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from toolkit.cli import main
from toolkit.errors import PctkError
from toolkit.local import procs
from toolkit.local.twin import Twin

pytestmark = pytest.mark.twin


def _processes_mentioning(text: str) -> list[int]:
    """Pids whose command line or environment mentions ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            env = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] == "Z":
            continue
        if text.encode() in cmd or f"PCTK_TWIN_DIR={text}\0".encode() in env:
            found.append(int(entry.name))
    return found


def _state_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="pctk-t-", dir="/tmp"))


def _small_config(tmp: Path, nodes: int, static: int = 0) -> Path:
    cfg = tmp / "scale.yaml"
    cfg.write_text(
        "Region: us-east-1\n"
        "Image: {Os: ubuntu2204}\n"
        "HeadNode: {InstanceType: c5.4xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}\n"
        "Scheduling:\n"
        "  Scheduler: slurm\n"
        "  SlurmQueues:\n"
        "    - Name: compute\n"
        "      Networking: {SubnetIds: [subnet-0123456789abcdef0]}\n"
        "      ComputeResources:\n"
        f"        - {{Name: c5, InstanceType: c5.4xlarge, MinCount: {static}, MaxCount: {nodes}}}\n"
    )
    return cfg


def test_up_is_idempotent_recovers_from_a_crash_and_down_leaves_nothing():
    state = _state_dir()
    twin = Twin(state)
    try:
        first = twin.up("p5-training", nodes=1)
        assert first.running
        names = {d["name"] for d in first.daemons}
        assert {"munged", "mariadbd", "slurmdbd", "slurmctld"} <= names
        # static nodes run their slurmd; dynamic ones are powered down until a job needs them
        assert "slurmd:gpu-st-p5-1" in names and "slurmd:cpu-dy-c5-1" not in names
        pids = {d["pid"] for d in first.daemons}
        assert set(_processes_mentioning(str(state))) >= pids

        # up on a running twin is a no-op: same processes
        again = twin.up("p5-training", nodes=1)
        assert {d["pid"] for d in again.daemons} == pids

        # other settings while running: the twin restarts with them
        said: list[str] = []
        bigger = twin.up("p5-training", nodes=2, progress=said.append)
        assert "slurmd:gpu-st-p5-2" in {d["name"] for d in bigger.daemons}
        assert not pids & {d["pid"] for d in bigger.daemons}
        assert any("restarting" in m for m in said)
        first = twin.up("p5-training", nodes=1)
        pids = {d["pid"] for d in first.daemons}

        # a crash: slurmctld dies; the next up starts it again, and only it (killed this soon,
        # it had not saved the static node's registration: that node's slurmd starts again)
        ctld = next(d for d in first.daemons if d["name"] == "slurmctld")
        os.kill(ctld["pid"], signal.SIGKILL)
        time.sleep(0.5)
        assert not twin.is_running()
        recovered = twin.up("p5-training", nodes=1)
        assert recovered.running
        kept = {d["name"]: d["pid"] for d in recovered.daemons}
        assert {n: p for n, p in kept.items() if n in ("munged", "mariadbd", "slurmdbd")} == {
            d["name"]: d["pid"] for d in first.daemons if d["name"] in ("munged", "mariadbd",
                                                                        "slurmdbd")}
        assert kept["slurmctld"] != ctld["pid"]
        assert {n["name"]: n["state"] for n in recovered.nodes} == {
            "gpu-st-p5-1": "idle", "cpu-dy-c5-1": "idle~"}

        # munged dies too: the whole twin starts afresh
        for name in ("slurmctld", "munged"):
            os.kill(kept[name], signal.SIGKILL)
        time.sleep(0.5)
        pids = set(kept.values())
        recovered = twin.up("p5-training", nodes=1)
        assert recovered.running
        assert not pids & {d["pid"] for d in recovered.daemons}
        assert {n["name"]: n["state"] for n in recovered.nodes} == {
            "gpu-st-p5-1": "idle", "cpu-dy-c5-1": "idle~"}
        survivors = [p for p in pids if p not in (kept["slurmctld"], kept["munged"])
                     and Path(f"/proc/{p}").exists()
                     and procs.start_ticks(p) > 0]
        assert not [p for p in survivors if p in _processes_mentioning(str(state))]
    finally:
        stopped = twin.down()
    assert "slurmctld" in stopped and "mariadbd" in stopped and "munged" in stopped
    assert _processes_mentioning(str(state)) == []
    assert not twin.status().running
    twin.down(purge=True)
    assert not state.exists()


def test_thirty_two_nodes_on_this_machine(tmp_path):
    state = _state_dir()
    twin = Twin(state)
    try:
        # static nodes: 32 slurmd running at once (dynamic ones would be powered down)
        st = twin.up(_small_config(tmp_path, 32, static=32), nodes=32, accounting=False)
        assert len(st.nodes) == 32
        assert {n["name"] for n in st.nodes} == {f"compute-st-c5-{i}" for i in range(1, 33)}
        env = {**os.environ, **twin.env()}
        r = subprocess.run(["srun", "-N32", "-p", "compute", "bash", "-c",
                            "echo $SLURMD_NODENAME"], capture_output=True, text=True, env=env,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert len(set(r.stdout.split())) == 32
    finally:
        twin.down(purge=True)
    assert _processes_mentioning(str(state)) == []


def test_port_in_use_is_a_clear_error_and_nothing_is_left(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        monkeypatch.setenv("PCTK_TWIN_PORT_BASE", str(port))
        state = _state_dir()
        with pytest.raises(PctkError, match="not all free"):
            Twin(state).up("p5-training", nodes=1, accounting=False)
        assert _processes_mentioning(str(state)) == []


def test_missing_slurm_binaries_exit_2_with_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    code = main(["local", "up", "--state-dir", str(tmp_path / "s"), "--nodes", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "missing programs: slurmctld" in err and "apt-get install" in err


def test_daemon_that_fails_to_start_names_its_log(tmp_path):
    state = _state_dir()
    # a slurm.conf the daemons cannot use: a node with an unknown GRES type in a bad config
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(_small_config(tmp_path, 1).read_text())
    twin = Twin(state)
    (state / "munge").mkdir(parents=True)
    (state / "munge" / "munge.key").write_bytes(b"short")  # munged refuses a 5-byte key
    os.chmod(state / "munge" / "munge.key", 0o400)
    with pytest.raises(PctkError) as err:
        twin.up(cfg, nodes=1, accounting=False, timeout=15)
    assert "munged" in str(err.value) and "log:" in str(err.value)
    assert _processes_mentioning(str(state)) == []
    twin.down(purge=True)


def test_unknown_config_is_a_clear_error(capsys, tmp_path):
    code = main(["local", "up", "--state-dir", str(tmp_path / "s"), "--config", "nope"])
    err = capsys.readouterr().err
    assert code == 2
    assert "cluster config nope not found" in err and "p5-training" in err
