"""Health sweeps on the shared twin with injected faults: exactly the faulty nodes FAIL the
right check and are drained with the right reason; after the fix --resume-healthy brings
back only those.

Faults (each undone at the end, the twin's nodes left idle):
- gpu-st-p5-2: its placeholder GPU device files (gres.conf File=) are deleted;
- gpu-st-p5-3: its mount folder is made read-only (read-only bind mount, else chattr +i;
  root ignores mode bits, so chmod would prove nothing);
- gpu-st-p5-4: a stand-in ``fi_info`` without the efa provider is first on its PATH.
Healthy nodes get a stand-in ``fi_info`` listing 32 EFA devices, so the efa check passes
there instead of being skipped (this machine has no EFA).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.health.faults import (
    FI_INFO_WITHOUT_EFA,
    failing,
    fi_info_with_efa,
    make_read_only,
    node_table,
    read_record,
    undo_read_only,
    write_tool,
)
from toolkit.cli import main
from toolkit.local.files import make_placeholder_device

pytestmark = pytest.mark.twin

GPU_NODES = [f"gpu-st-p5-{i}" for i in range(1, 5)]


def _sweep(base, *extra: str) -> tuple[int, dict]:
    out = base / f"record-{len(list(base.glob('record-*.json')))}.json"
    rc = main(["health", "run", "--partition", "gpu", "--mount", f"{base}/mnt/%n",
               "--tool-path", f"{base}/tools/%n/bin", "--workdir", str(base / "runs"),
               "--timeout", "120", "--out", str(out), *extra])
    return rc, read_record(out)


def _resume_pctk_drained(env) -> None:
    for node, (_state, reason) in node_table(env).items():
        if reason.startswith("pctk:"):
            subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], env=env)


def test_faulty_nodes_fail_and_drain_then_resume_after_the_fix(twin, capsys):
    base = twin.workdir / "health-faults"
    dev_files = sorted((twin.state_dir / "nodes" / "gpu-st-p5-2" / "dev").glob("nvidia*"))
    assert len(dev_files) == 8
    for node in GPU_NODES:
        (base / "mnt" / node).mkdir(parents=True)
        write_tool(base / "tools" / node / "bin", "fi_info", fi_info_with_efa())
    ro_dir = base / "mnt" / "gpu-st-p5-3"
    how = ""
    try:
        for f in dev_files:
            f.unlink()
        how = make_read_only(ro_dir)
        write_tool(base / "tools" / "gpu-st-p5-4" / "bin", "fi_info", FI_INFO_WITHOUT_EFA)

        rc, rec = _sweep(base, "--drain", "--max-drain", "3")
        assert rc == 2, capsys.readouterr().out
        assert rec["kind"] == "health" and rec["verdict"]["status"] == "FAIL"
        assert failing(rec) == {"gpu-st-p5-1": set(), "gpu-st-p5-2": {"gpu_devices"},
                                "gpu-st-p5-3": {"storage"}, "gpu-st-p5-4": {"efa"}}
        nodes = rec["metrics"]["nodes"]
        assert nodes["gpu-st-p5-1"]["efa"]["status"] == "OK"
        assert nodes["gpu-st-p5-1"]["gpu_devices"]["value"]["present"] == 8
        assert nodes["gpu-st-p5-2"]["gpu_devices"]["message"].startswith("8 of 8 GPU device")
        err = "Read-only file system" if how == "ro-bind" else "Operation not permitted"
        assert err in nodes["gpu-st-p5-3"]["storage"]["message"]
        assert nodes["gpu-st-p5-4"]["efa"]["value"] == 0
        assert all(set(body) == {"status", "value", "expected", "message", "remedy"}
                   for checks in nodes.values() for body in checks.values())

        table = node_table(twin.env)
        assert table["gpu-st-p5-1"] == ("idle", "")
        assert "drain" in table["gpu-st-p5-2"][0]
        assert table["gpu-st-p5-2"][1].startswith("pctk: gpu_devices: 8 of 8 GPU device files")
        assert table["gpu-st-p5-3"][1].startswith(f"pctk: storage: {ro_dir} not writable")
        assert table["gpu-st-p5-4"][1].startswith("pctk: efa: fi_info has no efa provider")
        assert all(table[n] == ("idle", "") for n in table if n.startswith("cpu-"))

        # a sweep without --resume-healthy leaves drained nodes alone and says so
        rc, rec = _sweep(base)
        assert rc == 1
        assert rec["metrics"]["nodes"]["gpu-st-p5-2"]["node"]["status"] == "WARN"
        assert list(rec["metrics"]["nodes"]["gpu-st-p5-2"]) == ["node"]

        # fix the faults
        for f in dev_files:
            make_placeholder_device(f)
        undo_read_only(ro_dir, how)
        how = ""
        write_tool(base / "tools" / "gpu-st-p5-4" / "bin", "fi_info", fi_info_with_efa())

        rc, rec = _sweep(base, "--resume-healthy")
        assert rc == 0, json.dumps(rec["verdict"])
        assert sorted(rec["params"]["resumed"]) == ["gpu-st-p5-2", "gpu-st-p5-3", "gpu-st-p5-4"]
        assert rec["params"]["drained"] == {}
        assert failing(rec) == {n: set() for n in GPU_NODES}
        table = node_table(twin.env)
        assert all(table[n] == ("idle", "") for n in GPU_NODES), table
        reservations = twin.cmd("scontrol", "show", "reservation").stdout
        assert "pctk-health" not in reservations
    finally:
        for f in dev_files:
            make_placeholder_device(f)
        if how:
            undo_read_only(ro_dir, how)
        _resume_pctk_drained(twin.env)


def test_unknown_node_is_one_line_and_unknown(twin, capsys):
    rc = main(["health", "run", "--nodes", "gpu-st-p5-9"])
    assert rc == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pctk: error: unknown node: gpu-st-p5-9")
    assert "gpu-st-p5-1" in err[0]


def test_quick_sweep_of_a_healthy_partition_passes(twin, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    out = tmp_path / "rec.json"
    rc = main(["health", "run", "--partition", "cpu", "--mount", str(mnt), "--workdir",
               str(tmp_path / "runs"), "--out", str(out), "--json"])
    rec = read_record(out)
    assert rc == 0, rec["verdict"]
    assert sorted(rec["metrics"]["nodes"]) == [f"cpu-dy-c5-{i}" for i in range(1, 5)]
    for checks in rec["metrics"]["nodes"].values():
        assert checks["munge"]["status"] == "OK"  # the twin's own munged, from slurm.conf
        assert checks["gpu_devices"]["status"] == "SKIP"
        assert checks["storage"]["status"] == "OK"
    assert rec["cluster"]["instance_type"] == "c5.4xlarge"
