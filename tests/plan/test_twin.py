"""`pctk plan --emit-config` brings up a twin, and a plan made from that twin's own FSDP
record says that twin figures are not GPU figures (and does not use them)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from toolkit.cli import main
from toolkit.local.twin import Twin
from toolkit.results.store import ResultStore

pytestmark = pytest.mark.twin


def _sinfo(twin: Twin) -> dict[str, str]:
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%P|%T"], capture_output=True, text=True,
                       env={**os.environ, **twin.env()}, timeout=30, check=True)
    return {n: f"{p}|{st}" for n, p, st in (ln.split("|") for ln in r.stdout.split("\n") if ln)}


def test_emitted_config_passes_check_brings_up_a_twin_and_its_record_is_named_as_twin(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "planned.yaml"
    code = main(["plan", "--model", "tiny", "--tokens", "1e9", "--nodes", "2",
                 "--emit-config", str(config), "--name", "plantwin", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["emit_config"]["written"] and out["emit_config"]["check"]["valid"]
    assert main(["config", "check", str(config)]) == 0
    capsys.readouterr()

    twin = Twin(Path(tempfile.mkdtemp(prefix="pctk-pl-", dir="/tmp")))
    try:
        twin.up(config, nodes=2, accounting=False)
        nodes = _sinfo(twin)
        # the planned GPU queue: 2 static p5.48xlarge nodes, up and idle
        assert {n: s for n, s in nodes.items() if n.startswith("gpu")} == {
            "gpu-st-p5-1": "gpu*|idle", "gpu-st-p5-2": "gpu*|idle"}, nodes
        for k, v in twin.env().items():
            monkeypatch.setenv(k, v)
        run_dir = tmp_path / "fsdp"
        code = main(["bench", "fsdp", "--model", "tiny", "--nodes", "2", "--tasks-per-node",
                     "1", "--gpus-per-node", "0", "--partition", "gpu", "--steps", "6",
                     "--ckpt-every", "3", "--run-dir", str(run_dir), "--timeout", "240"])
        log = "\n".join(p.read_text() for p in run_dir.glob("slurm-*.out"))
        assert code == 0, log
    finally:
        twin.down(purge=True)
    capsys.readouterr()
    record = json.loads((run_dir / "record.json").read_text())
    assert record["cluster"]["twin"] is True and record["params"]["device"] == "cpu"
    assert record["metrics"]["checkpoint_saves"]  # a measured (local disk) write rate
    db = tmp_path / "results.db"
    with ResultStore(db) as store:
        rid = store.add(record)

    code = main(["plan", "--model", "8b", "--tokens", "1e12", "--from-record", rid,
                 "--db", str(db), "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0
    said = " ".join(plan["notes"])
    assert "measured on the local twin" in said and "twin figures are not GPU figures" in said
    # neither the twin's MFU (none: a CPU has no known peak) nor its local-disk checkpoint
    # rate reached the plan: the defaults did, and say so
    assert plan["inputs"]["mfu"]["source"].startswith("planning default")
    assert plan["inputs"]["checkpoint_write_gb_per_s"]["source"].startswith("default")
    assert plan["inputs"]["instance_type"]["source"].startswith("default")

    main(["plan", "--model", "8b", "--tokens", "1e12", "--from-record", rid, "--db", str(db)])
    text = capsys.readouterr().out
    assert "twin figures are not GPU figures" in text
