"""FLOPs accounting for the Llama 3.1 8B shape, against a hand computation."""

from __future__ import annotations

import pytest
import torch

from benchmarks.fsdp.metrics import ThroughputMeter, percentile
from benchmarks.fsdp.model import PRESETS, Transformer, count_params, preset
from benchmarks.hardware import peak_tflops_for
from benchmarks.modelmath import shape_of, training_flops_per_token


def test_8b_flops_per_token_matches_hand_computation() -> None:
    dim, layers, heads, kv_heads, ffn, vocab, seq = 4096, 32, 32, 8, 14336, 128256, 8192
    head_dim = dim // heads  # 128
    attention = dim * dim + 2 * dim * kv_heads * head_dim + dim * dim  # wq, wk, wv, wo
    mlp = 3 * dim * ffn  # w1, w2, w3
    norms = 2 * dim
    per_layer = attention + mlp + norms  # 41,943,040 + 176,160,768 + 8,192 = 218,112,000
    output = dim * vocab  # the lm head is a matmul: counted; the embedding lookup is not
    n_non_embedding = layers * per_layer + dim + output  # + final norm = 7,504,924,672
    hand = 6 * n_non_embedding + 12 * layers * heads * head_dim * seq
    assert hand == 57_914_449_920  # 45,029,548,032 + 12,884,901,888

    with torch.device("meta"):
        model = Transformer(preset("8b"))
    total, non_embedding = count_params(model)
    assert total == 8_030_261_248  # Llama 3.1 8B: "8.03B"
    assert non_embedding == n_non_embedding
    assert training_flops_per_token(shape_of(preset("8b")), seq) == pytest.approx(hand, rel=0.01)

    # torchtitan's published 5,762 tokens/s per H100 for 8B eager is "about 34% MFU"
    meter = ThroughputMeter(tokens_per_step_per_rank=5762, flops_per_token=hand,
                            peak_tflops=989.0, warmup_steps=0)
    assert meter.last(1.0)["mfu"] == pytest.approx(0.337, abs=0.005)


@pytest.mark.parametrize(("name", "billions"), [("1b", 1.50), ("8b", 8.03), ("70b", 70.55)])
def test_presets_have_the_published_sizes(name: str, billions: float) -> None:
    with torch.device("meta"):
        total, _ = count_params(Transformer(PRESETS[name]))
    # 1b: Llama 3.2 1B is 1.24B with tied embeddings; untied here adds 128256 x 2048
    assert total / 1e9 == pytest.approx(billions, abs=0.01)


def test_tiny_is_a_few_hundred_thousand_parameters() -> None:
    total, _ = count_params(Transformer(PRESETS["tiny"]))
    assert 100_000 < total < 1_000_000


@pytest.mark.parametrize(("device", "peak"), [
    ("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 PCIe", 756.0), ("NVIDIA H100 NVL", 835.0),
    ("NVIDIA H200", 989.0), ("NVIDIA H200 NVL", 835.0), ("NVIDIA A100-SXM4-40GB", 312.0),
    ("NVIDIA B200", 2250.0), ("NVIDIA GB200", 2500.0), ("NVIDIA L40S", 362.05),
    ("NVIDIA A10G", 70.0),
    # not in the table: no MFU rather than a neighbour's peak
    ("Tesla T4", None), ("NVIDIA H100", None), ("NVIDIA H800", None), ("NVIDIA GH200 480GB", None),
])
def test_bf16_peak_by_exact_device_name(device: str, peak: float | None) -> None:
    assert peak_tflops_for(device) == peak


def test_fp32_runs_get_the_fp32_peak_or_none() -> None:
    assert peak_tflops_for("NVIDIA H100 80GB HBM3", "float32") == 67.0
    assert peak_tflops_for("NVIDIA A100-SXM4-80GB", "float32") == 19.5
    assert peak_tflops_for("NVIDIA A10G", "float32") is None  # no datasheet: no MFU
    with pytest.raises(ValueError, match="float16"):
        peak_tflops_for("NVIDIA H200", "float16")


def test_meter_skips_warmup_and_reports_percentiles() -> None:
    meter = ThroughputMeter(tokens_per_step_per_rank=1000, flops_per_token=10**9,
                            peak_tflops=None, warmup_steps=2)
    for seconds in (9.0, 9.0, 1.0, 2.0, 3.0, 4.0):
        meter.record(seconds)
    summary = meter.summary()
    assert summary["measured_steps"] == 4
    assert summary["step_time_p50_s"] == pytest.approx(2.5)
    assert summary["step_time_p90_s"] == pytest.approx(percentile([1.0, 2.0, 3.0, 4.0], 90))
    assert summary["tokens_per_s_per_gpu"] == pytest.approx(1000 / 2.5)
    assert summary["mfu"] is None
