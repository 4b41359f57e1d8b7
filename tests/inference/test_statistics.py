"""Statistics that agree with themselves: TPOT and tokens/s per sequence come from the same
decode steps, the warm-up is not timed and the output says so, and a percentile is printed
only where there are samples enough to carry it (a "p99" of 4 requests is their maximum)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.serving.load import samples_for, spread
from toolkit.bench.inference.serve import _ms3

REPO = Path(__file__).resolve().parents[2]


def test_tpot_and_tokens_per_second_are_one_figure(tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    r = subprocess.run([sys.executable, "-m", "benchmarks.inference.bench", "run", "--model",
                        "tiny", "--device", "cpu", "--prompt-lens", "32,128", "--batch-sizes",
                        "1,4", "--decode-tokens", "24", "--parts", str(parts)],
                       capture_output=True, text=True, timeout=300, cwd=REPO,
                       env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                            "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    (part,) = [json.loads(p.read_text()) for p in parts.glob("*.json")]
    for row in part["decode"]:
        assert row["tokens_per_s_per_seq"] == pytest.approx(1 / row["tpot_s"], rel=1e-9)
        assert row["tokens_per_s"] == pytest.approx(row["batch"] / row["tpot_s"], rel=1e-9)
        assert row["tpot_p50_s"] > 0 and row["tpot_p90_s"] >= row["tpot_p50_s"]


def test_percentiles_need_samples_enough() -> None:
    assert (samples_for(50), samples_for(90), samples_for(99)) == (1, 10, 100)
    four = spread([0.010, 0.011, 0.012, 0.040])
    assert four["p50"] == pytest.approx(0.0115)
    assert four["p90"] is None and four["p99"] is None
    assert four["count"] == 4 and four["max"] == 0.040
    assert _ms3(four) == "11.5/-/- ms (4 samples, max 40.0 ms; p90 needs 10, p99 100)"
    many = spread([i / 1000 for i in range(1, 101)])
    assert many["p99"] == pytest.approx(0.09901) and many["count"] == 100
    assert _ms3(many) == "50.5/90.1/99.0 ms"
    empty = spread([])
    assert empty["p50"] is None and empty["count"] == 0 and _ms3(empty) == "-/-/- ms"
