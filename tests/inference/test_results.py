"""Inference records in the results store: the record `merge` writes from a GPU node's part
(8B figures at the size of an H100's), its headline, trend series and report plot with the
roofline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.fsdp.config import PRESETS
from benchmarks.inference import bench, roofline
from benchmarks.record import read_record
from toolkit.results import metrics as m
from toolkit.results.history import load_series
from toolkit.results.prometheus import write_textfile
from toolkit.results.report import render_report
from toolkit.results.store import ResultStore

SETTINGS = {"model": "8b", "prompt_lens": [2048], "batch_sizes": [1, 64], "context": 2048,
            "decode_tokens": 1, "warmup": 0, "repeats": 3, "samples": 16, "output_len": 4096,
            "mem_bw_tbps": 3.35, "peak_tflops": 989.0, "device": "auto", "seed": 0}


def gpu_part(fraction: float) -> dict[str, Any]:
    """What an H100 node reaching ``fraction`` of the decode roofline would write."""
    decode = []
    for batch in (1, 64):
        bound = roofline.decode_bound(PRESETS["8b"], batch, 2048, mem_bw_tbps=3.35,
                                      peak_tflops=989).tokens_per_s
        tps = fraction * bound
        decode.append({"batch": batch, "steps": 1, "mean_context": 2048.0,
                       "tpot_s": batch / tps, "tpot_p90_s": batch / tps,
                       "tokens_per_s_per_seq": tps / batch, "tokens_per_s": tps,
                       "kv_cache_bytes": batch * 2049 * 131_072})
    return {"device": "cuda", "dtype": "bfloat16", "device_name": "NVIDIA H100 80GB HBM3",
            "host": "gpu-1", "rank": 0, "peak_memory_gib": 20.0, "settings": SETTINGS,
            "prefill": [{"prompt_len": 2048, "ttft_s": 0.05, "tokens_per_s": 40_960.0}],
            "decode": decode,
            "test_time": {"samples": 16, "output_len": 4096, "prompt_len": 2048,
                          "output_tokens": 65_536, "seconds": 40.0, "tokens_per_s": 1638.4,
                          "kv_cache_bytes": 0}}


def merged(tmp_path: Path, fraction: float) -> dict[str, Any]:
    parts = tmp_path / f"parts-{fraction}"
    parts.mkdir()
    (parts / "part-0.json").write_text(json.dumps(gpu_part(fraction)))
    out = tmp_path / f"record-{fraction}.json"
    assert bench.main(["merge", "--parts", str(parts), "--out", str(out),
                       "--gpus-per-node", "8", "--price-usd-per-hour", "55.04"]) == 0
    return read_record(out)


def test_merge_judges_the_roofline_and_prices_a_million_tokens(tmp_path: Path) -> None:
    rec = merged(tmp_path, 0.5)
    roof = rec["metrics"]["roofline"]
    assert roof["judged"] and [d["fraction"] for d in roof["decode"]] == pytest.approx([.5, .5])
    assert roof["decode"][0]["bound_tokens_per_s"] == pytest.approx(219.27, abs=0.01)
    assert rec["verdict"]["reasons"][0] == "decode batch 1: 50% of the memory bound (219 tokens/s)"
    tt = rec["metrics"]["test_time"]
    # 8 replicas x 1,638.4 tokens/s = 13,107.2 per node; $55.04/h / 3600 / 13,107.2 x 1e6
    assert tt["tokens_per_s_per_node"] == pytest.approx(13_107.2)
    assert tt["usd_per_million_output_tokens"] == pytest.approx(1.1665, abs=1e-4)


def test_compare_flags_a_decode_drop(tmp_path: Path) -> None:
    from toolkit.results.compare import compare_records

    base, now = merged(tmp_path, 0.5), merged(tmp_path, 0.4)
    got = compare_records(now, base, 0.1)
    points = {(p.metric, p.where): p for p in got.points}
    assert set(points) == {("decode_tokens_per_s", "batch 1"),
                           ("decode_tokens_per_s", "batch 64"),
                           ("prefill_tokens_per_s", "prompt 2048")}
    assert points[("decode_tokens_per_s", "batch 1")].change == pytest.approx(-0.2)
    assert [p.where for p in got.regressions] == ["batch 1", "batch 64"]


def test_merge_without_parts_is_exit_2(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["merge", "--parts", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "no node finished measuring" in capsys.readouterr().err


def test_store_headline_trend_and_report_plot(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "results.db") as store:
        for fraction in (0.4, 0.5):
            rec = merged(tmp_path, fraction)
            rec["cluster"].update(name="infer-a", instance_type="p5.48xlarge")
            store.add(rec)
        latest = store.list(kind="inference")[0]
        assert m.headline(latest).startswith("decode b1 110 tok/s (50% of roofline), "
                                             "decode b64 3,330 tok/s (50% of roofline)")
        series = load_series(store, "inference")
        assert {s.key.where for s in series} == {"batch 1", "batch 64"}
        assert all(len(s.points) == 2 for s in series)
        html = render_report(store).html
        prom, _ = write_textfile(store, tmp_path / "pctk.prom", 0.1)
    text = prom.read_text()
    labels = 'cluster="infer-a",instance_type="p5.48xlarge"'
    assert f'pctk_inference_decode_roofline_ratio{{batch="1",{labels}}} 0.5' in text
    assert f'pctk_inference_ttft_seconds{{{labels},prompt_len="2048"}} 0.05' in text
    assert f"pctk_inference_usd_per_million_output_tokens{{{labels}}} 1.16" in text
    section = html.split("Inference: decode throughput and roofline", 1)[1]
    assert 'alt="decode tokens per second against batch size, with the memory-bandwidth ' \
           'roofline" data-points="2"' in section
    assert "no inference results" not in html
