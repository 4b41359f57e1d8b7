"""twin.json as toolkit.local.state reads and writes it: a torn, foreign or missing file is no
state, a field of the wrong type is its default, keys of other versions survive a rewrite, and
one up/down at a time holds the folder. Real files, no twin needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.errors import PctkError
from toolkit.local import procs, state
from toolkit.local.plan import Ports


def _write(folder: Path, text: str) -> None:
    (folder / state.STATE_FILE).write_text(text)


@pytest.mark.parametrize("text", ['{"version": 2, "procs": [', "[1, 2, 3]", '"twin"', "",
                                  "\x00\x01binary"])
def test_torn_or_foreign_file_is_no_state(tmp_path: Path, text: str) -> None:
    _write(tmp_path, text)
    assert state.load(tmp_path) is None


def test_missing_file_is_no_state(tmp_path: Path) -> None:
    assert state.load(tmp_path) is None
    assert state.load(tmp_path / "never-made") is None
    assert not state.any_daemon_up(tmp_path)


def test_round_trip_keeps_every_field_and_unknown_keys(tmp_path: Path) -> None:
    me = procs.Proc("slurmctld", os.getpid(), procs.start_ticks(os.getpid()), "/x/ctld.log")
    st = state.TwinState(config="/c/p5.yaml", config_sha256="ab" * 32, cluster="p5",
                         nodes_per_resource=3, accounting=True,
                         ports=Ports(slurmctld=7001, slurmdbd=7002, mysql=7003,
                                     slurmd_base=7100),
                         nodes=["gpu-st-p5-1"], partitions=["gpu"], procs=[me],
                         started=1.5, drains={"gpu-st-p5-1": "operator: cable"},
                         notes=["capped"], mounts=[{"dir": "/fsx"}],
                         extra={"from_a_newer_version": {"k": 1}})
    state.save(tmp_path, st)
    on_disk = json.loads((tmp_path / state.STATE_FILE).read_text())
    assert on_disk["from_a_newer_version"] == {"k": 1} and on_disk["version"] == 2
    back = state.load(tmp_path)
    assert back == st
    # the recorded process is this test's own: the folder has a live daemon by its rules
    assert state.any_daemon_up(tmp_path)


def test_wrong_types_read_as_defaults(tmp_path: Path) -> None:
    _write(tmp_path, json.dumps({
        "config": 7, "cluster": ["x"], "nodes_per_resource": "4", "accounting": "yes",
        "ports": {"slurmctld": "not a port"}, "nodes": "gpu-st-p5-1",
        "procs": [{"name": "slurmctld"}], "started": True, "drains": ["a"],
        "mounts": [1, {"dir": "/fsx"}], "version": None}))
    st = state.load(tmp_path)
    assert st is not None
    assert (st.config, st.cluster, st.nodes_per_resource, st.ports) == (None, None, None, None)
    assert st.accounting is True  # any true value, as before the typed state
    assert st.nodes == [] and st.procs == [] and st.drains == {} and st.started is None
    assert st.mounts == [{"dir": "/fsx"}] and st.version == 0
    assert not state.any_daemon_up(tmp_path)


def test_a_dead_recorded_process_is_not_up(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = procs.start_ticks(child.pid)
    child.wait()
    state.save(tmp_path, state.TwinState(procs=[procs.Proc("slurmctld", child.pid, ticks, "")]))
    assert not state.any_daemon_up(tmp_path)


def test_one_up_or_down_at_a_time(tmp_path: Path) -> None:
    held = state.lock(tmp_path)
    held.__enter__()
    try:
        with pytest.raises(PctkError, match="another pctk is starting"), state.lock(tmp_path):
            pass
    finally:
        held.__exit__(None, None, None)
    with state.lock(tmp_path):  # released: the next one gets it
        pass
