"""The twin's status across daemon deaths and restarts, and an operator's drains."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from toolkit.cli import main
from toolkit.local.twin import Twin

pytestmark = pytest.mark.twin

REASON = "bad gpu 3 (ticket 42)"


def _state_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="pctk-s-", dir="/tmp"))


def _nodes(twin: Twin) -> dict[str, tuple[str, str]]:
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"], capture_output=True, text=True,
                       env={**os.environ, **twin.env()}, timeout=30, check=True)
    return {n: (st, reason) for n, st, reason in (ln.split("|", 2) for ln in r.stdout.split("\n")
                                                  if ln)}


def _scontrol(twin: Twin, *args: str) -> None:
    subprocess.run(["scontrol", *args], env={**os.environ, **twin.env()}, timeout=30,
                   check=True, capture_output=True)


def test_an_operators_drain_survives_down_and_up():
    twin = Twin(_state_dir())
    try:
        twin.up("p5-training", nodes=1, accounting=False)
        _scontrol(twin, "update", "NodeName=gpu-st-p5-1", "State=DRAIN", f"Reason={REASON}")
        assert _nodes(twin)["gpu-st-p5-1"] == ("drained", REASON)
        twin.down()
        st = twin.up("p5-training", nodes=1, accounting=False)
        assert st.running
        nodes = _nodes(twin)
        assert nodes["gpu-st-p5-1"] == ("drained", REASON)
        assert nodes["cpu-dy-c5-1"][0] == "idle~"  # dynamic: powered down
        # and again, after a crash instead of a clean down
        slurmd = next(d for d in st.daemons if d["name"] == "slurmd:gpu-st-p5-1")
        os.kill(slurmd["pid"], signal.SIGKILL)
        twin.up("p5-training", nodes=1, accounting=False)
        assert _nodes(twin)["gpu-st-p5-1"] == ("drained", REASON)
    finally:
        twin.down(purge=True)


def _status(state: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = main(["local", "status", "--state-dir", str(state), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_status_names_dead_daemons_and_env_refuses_a_stopped_twin(capsys):
    state = _state_dir()
    twin = Twin(state)
    try:
        st = twin.up("p5-training", nodes=1, accounting=False)
        code, js = _status(state, capsys)
        assert (code, js["state"], js["dead_daemons"]) == (0, "running", [])

        victim = next(d for d in st.daemons if d["name"] == "slurmd:gpu-st-p5-1")
        os.kill(victim["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while twin.status().running and time.monotonic() < deadline:
            time.sleep(0.1)
        code, js = _status(state, capsys)
        assert (code, js["state"], js["dead_daemons"]) == (1, "degraded", ["slurmd:gpu-st-p5-1"])
        assert main(["local", "status", "--state-dir", str(state)]) == 1
        assert "degraded (slurmd:gpu-st-p5-1 down)" in capsys.readouterr().out
        assert main(["local", "env", "--state-dir", str(state)]) == 0
        out = capsys.readouterr()
        assert "export SLURM_CONF=" in out.out and "degraded" in out.err
    finally:
        twin.down()
    code, js = _status(state, capsys)
    assert (code, js["state"]) == (3, "stopped")
    for extra in ([], ["--json"]):
        assert main(["local", "env", "--state-dir", str(state), *extra]) == 2
        out = capsys.readouterr()
        assert out.out == ""
        assert out.err.count("\n") == 1 and "is not running" in out.err
    twin.down(purge=True)
