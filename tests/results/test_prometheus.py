from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from toolkit.results.prometheus import Family, render, write_textfile
from toolkit.results.store import ResultStore

from . import records
from .conftest import Run
from .promparse import ExpositionError, parse


@pytest.fixture
def filled(tmp_path: Path) -> ResultStore:
    store = ResultStore(tmp_path / "results.db")
    base = store.add(records.nccl_record(created="2026-01-01T00:00:00Z"))
    store.set_baseline(base)
    store.add(records.nccl_record(scale=records.drop_above(8 << 30, 0.8),
                                  created="2026-01-02T00:00:00Z"))
    store.add(records.collectives_record())
    store.add(records.fsdp_record())
    store.add(records.health_record(fail=("gpu-st-p5-2", "gpu_count")))
    return store


def test_textfile_parses_and_carries_the_latest_results(filled: ResultStore,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "textfile_collector" / "pctk.prom"
    path, samples = write_textfile(filled, out, 0.05)
    families = parse(path.read_text())
    assert samples == sum(len(f["samples"]) for f in families.values())
    for name, fam in families.items():
        assert name.startswith("pctk_") and fam["type"] == "gauge" and fam["help"]

    busbw = {(s[0]["kind"], s[0]["collective"], s[0]["size"]): s[1]
             for s in families["pctk_busbw_bytes_per_second"]["samples"]}
    top = busbw[("nccl-tests", "all_reduce", str(16 << 30))]
    assert top == pytest.approx(records.busbw_at("all_reduce", 16 << 30) * 0.8 * 1e9,
                                rel=1e-4)  # nccl-tests prints 2 decimals
    assert ("collectives", "reduce_scatter", str(1 << 20)) in busbw

    health = {(s[0]["node"], s[0]["check"]): s[1]
              for s in families["pctk_health_check_status"]["samples"]}
    assert health[("gpu-st-p5-2", "gpu_count")] == 2
    assert health[("gpu-st-p5-1", "gpu_count")] == 0
    assert health[("gpu-st-p5-1", "xid_errors")] == 3

    (mfu,) = families["pctk_fsdp_mfu_ratio"]["samples"]
    assert mfu[0] == {"cluster": "train-a", "instance_type": "p5.48xlarge"} and mfu[1] == 0.34
    (mem,) = families["pctk_fsdp_peak_memory_bytes"]["samples"]
    assert mem[1] == pytest.approx(61.2 * 2**30)
    assert families["pctk_fsdp_checkpoint_save_seconds"]["samples"][0][1] == pytest.approx(9.2)
    regressions = {s[0]["kind"]: s[1] for s in families["pctk_baseline_regressions"]["samples"]}
    assert regressions == {"nccl-tests": 2}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert [p.name for p in out.parent.iterdir()] == ["pctk.prom"]  # no temp file left


def test_label_values_are_escaped() -> None:
    fam = Family("pctk_test_ratio", "A test.")
    fam.add({"node": 'we"ird\\name\nx'}, 0.5)
    (labels, value), = parse(render([fam]))["pctk_test_ratio"]["samples"]
    assert labels == {"node": 'we"ird\\name\nx'} and value == 0.5


def test_parser_rejects_broken_files() -> None:
    for text in ("pctk_x{a=\"1\"} one\n", "pctk_x 1\npctk_x 2\n", "pctk x 1\n",
                 "# TYPE pctk_x gauge\n# TYPE pctk_x gauge\n", "pctk_x 1"):
        with pytest.raises(ExpositionError):
            parse(text)


def test_cli_writes_the_textfile(filled: ResultStore, tmp_path: Path, pctk: Run,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PCTK_RESULTS_DB", raising=False)
    out = tmp_path / "pctk.prom"
    code, stdout, _ = pctk("results", "prometheus", "--out", out, "--db", filled.path)
    assert code == 0 and "samples" in stdout
    parse(out.read_text())
    code, stdout, _ = pctk("results", "prometheus", "--db", filled.path)
    assert code == 0 and parse(stdout)["pctk_health_check_status"]


def test_textfile_path_that_is_a_folder_is_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    pctk = Path(sys.executable).parent / "pctk"
    for argv in (["results", "prometheus", "-o", str(tmp_path), "--db", str(tmp_path / "r.db")],
                 ["observe", "collect", "-o", str(tmp_path)]):
        r = subprocess.run([str(pctk), *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.splitlines() == [f"pctk: error: {tmp_path} is a folder; fix: give a file "
                                         f"path, e.g. {tmp_path / 'pctk.prom'}"]
    # refused before writing: no temporary file beside the folder
    assert list(tmp_path.parent.glob(tmp_path.name + ".*")) == []
