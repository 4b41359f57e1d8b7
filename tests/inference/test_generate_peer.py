"""The transformers ``generate`` peer and gpu_check's side-by-side, run for real on a CPU
with the tiny shape (plumbing; the figures that matter come from a GPU)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from benchmarks import gpu_check
from benchmarks.inference import bench
from benchmarks.record import read_record

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers (the reference extra) is not installed")


def test_generate_peer_and_pctk_side_by_side(tmp_path: Path) -> None:
    from benchmarks.reference import generate_peer

    assert generate_peer.main(["--device", "cpu", "--model", "tiny", "--batch-sizes", "1,2",
                               "--context", "16", "--decode-tokens", "6", "--repeats", "1",
                               "--out", str(tmp_path / "generate.json")]) == 0
    rec = read_record(tmp_path / "generate.json")
    assert rec["kind"] == "inference" and "generate" in rec["params"]["implementation"]
    rows = rec["metrics"]["decode"]
    assert [r["batch"] for r in rows] == [1, 2] and all(r["tokens_per_s"] > 0 for r in rows)
    assert not rec["metrics"]["roofline"]["judged"]

    parts = tmp_path / "parts"
    assert bench.main(["run", "--device", "cpu", "--model", "tiny", "--prompt-lens", "16",
                       "--batch-sizes", "1,2", "--context", "16", "--decode-tokens", "6",
                       "--parts", str(parts)]) == 0
    assert bench.main(["merge", "--parts", str(parts), "--out",
                       str(tmp_path / "inference.json")]) == 0
    lines = gpu_check.inference_side_by_side(tmp_path)
    assert lines[0].split() == ["batch", "eager", "graph", "generate", "eager/gen", "graph/gen"]
    pctk = {r["batch"]: r["tokens_per_s"]
            for r in read_record(tmp_path / "inference.json")["metrics"]["decode"]}
    for line, row in zip(lines[1:], rows, strict=True):
        cells = line.split()
        assert int(cells[0]) == row["batch"] and cells[2] == "nan"  # no graphed run on a CPU
        assert float(cells[4]) == pytest.approx(pctk[row["batch"]] / row["tokens_per_s"],
                                                abs=0.006)


def test_no_generate_record_means_no_side_by_side(tmp_path: Path) -> None:
    assert gpu_check.inference_side_by_side(tmp_path) == []
