"""The roofline arithmetic against numbers worked by hand for Llama 3.1 8B on one H100 SXM
(3.35 TB/s, 989 dense bf16 TFLOP/s, bf16 weights and KV cache)."""

from __future__ import annotations

import pytest

from benchmarks import modelmath
from benchmarks.fsdp.config import PRESETS
from benchmarks.inference import roofline
from toolkit import catalog

EIGHT_B = PRESETS["8b"]
CONTEXT = 2048  # tokens cached per sequence

# Per layer: wq 4096x4096 + wk, wv 4096x1024 each + wo 4096x4096 = 41,943,040;
# w1, w2, w3 3 x 4096x14,336 = 176,160,768; two norms 8,192 -> 218,112,000.
# 32 layers = 6,979,584,000; final norm 4,096; output head 4096 x 128,256 = 525,336,576.
PARAMS = 6_979_584_000 + 4_096 + 525_336_576  # 7,504,924,672 (the embedding is a lookup)
WEIGHT_BYTES = 2 * PARAMS  # 15,009,849,344
# K and V x 32 layers x 8 kv heads x 128 head dim x 2 bytes = 131,072 bytes per token
KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2
BYTES_B1 = WEIGHT_BYTES + 1 * CONTEXT * KV_PER_TOKEN  # 15,278,284,800
BYTES_B64 = WEIGHT_BYTES + 64 * CONTEXT * KV_PER_TOKEN  # 32,189,718,528
BOUND_B1 = 3.35e12 / 15_278_284_800  # 219.27 tokens/s
BOUND_B64 = 64 * 3.35e12 / 32_189_718_528  # 6,660.5 tokens/s


def test_hand_worked_figures_are_what_they_say() -> None:
    assert PARAMS == 7_504_924_672 and KV_PER_TOKEN == 131_072
    assert BYTES_B1 == 15_278_284_800 and BYTES_B64 == 32_189_718_528
    assert round(BOUND_B1, 2) == 219.27
    assert round(BOUND_B64, 1) == 6660.5


def test_8b_decode_on_h100_at_batch_1_and_64() -> None:
    shape = modelmath.shape_of(EIGHT_B)
    assert shape.params_non_embedding == PARAMS
    assert modelmath.decode_weight_bytes(shape) == WEIGHT_BYTES
    assert modelmath.kv_bytes_per_token(shape) == KV_PER_TOKEN
    h100 = catalog.get("p5.48xlarge").accelerator
    assert h100 is not None and h100.mem_bw_tbps == 3.35
    for batch, nbytes, bound in ((1, BYTES_B1, BOUND_B1), (64, BYTES_B64, BOUND_B64)):
        got = roofline.decode_bound(EIGHT_B, batch, CONTEXT, mem_bw_tbps=h100.mem_bw_tbps,
                                    peak_tflops=h100.peak_bf16_tflops)
        assert got.bytes_per_step == nbytes
        assert got.limit == "memory"
        assert got.tokens_per_s == pytest.approx(bound, rel=1e-12)


def test_large_batch_turns_compute_bound() -> None:
    # 4096 sequences at context 16: 4096 x 2 x 7.5e9 FLOPs = 6.1e13 per step, 62 ms at
    # 989 TFLOP/s; the bytes are 15.0 GB + 4096 x 16 x 131,072 B = 23.6 GB, 7.0 ms at 3.35 TB/s
    got = roofline.decode_bound(EIGHT_B, 4096, 16, mem_bw_tbps=3.35, peak_tflops=989)
    assert got.limit == "compute"
    flops = 4096 * (2 * PARAMS + 4 * 32 * 32 * 128 * 16)
    assert got.flops_per_step == flops
    assert got.tokens_per_s == pytest.approx(4096 / (flops / 989e12))


def test_prefill_bound_counts_the_causal_half() -> None:
    """Under a causal mask token i of the prompt attends to i tokens, not to all 2,048: the
    prompt costs 2 x 7,504,924,672 x 2048 + 4 x 32 layers x 32 heads x 128 x 2048 x 2049 / 2
    = 31,840,219,955,200 FLOPs, 15,546,982,400 a token, 63,613.6 tokens/s at 989 TFLOP/s
    (counting the whole square gave 16,083,591,168 a token and 61,491.2 tokens/s)."""
    got = roofline.prefill_bound(EIGHT_B, 2048, peak_tflops=989)
    total = 2 * PARAMS * 2048 + 4 * 32 * 32 * 128 * 2048 * 2049 // 2
    assert total == 31_840_219_955_200
    assert total == sum(2 * PARAMS + 4 * 32 * 32 * 128 * i for i in range(1, 2049))
    assert got.flops_per_step == total
    assert got.tokens_per_s == pytest.approx(63_613.6, abs=0.1)
    # at 32k tokens the full square would understate the bound by 36%
    long = roofline.prefill_bound(EIGHT_B, 32_768, peak_tflops=989).tokens_per_s
    square = 989e12 / (2 * PARAMS + 4 * 32 * 32 * 128 * 32_768)
    assert long / square == pytest.approx(1.364, abs=0.001)


def test_judge_gives_fractions_on_a_gpu_and_says_why_not_on_a_cpu() -> None:
    metrics = {"decode": [{"batch": 1, "mean_context": CONTEXT, "tokens_per_s": 0.6 * BOUND_B1}],
               "prefill": [{"prompt_len": 2048, "tokens_per_s": 31_000.0}]}
    verdict = roofline.judge(EIGHT_B, metrics, device="cuda", dtype="bfloat16",
                             mem_bw_tbps=3.35, peak_tflops=989)
    assert verdict["judged"]
    assert verdict["decode"][0]["fraction"] == pytest.approx(0.6)
    assert verdict["prefill"][0]["fraction"] == pytest.approx(31_000 / 63_613.6, rel=1e-5)
    cpu = roofline.judge(EIGHT_B, metrics, device="cpu", dtype="float32", mem_bw_tbps=3.35,
                         peak_tflops=989)
    assert not cpu["judged"] and "no roofline is judged" in cpu["reason"]
    unknown = roofline.judge(EIGHT_B, metrics, device="cuda", dtype="bfloat16",
                             mem_bw_tbps=None, peak_tflops=989)
    assert not unknown["judged"] and "--instance-type" in unknown["reason"]


def test_every_gpu_bandwidth_in_the_catalog_is_sourced() -> None:
    figures = {"p4d.24xlarge": 1.555, "p4de.24xlarge": 2.039, "p5.48xlarge": 3.35,
               "p5en.48xlarge": 4.8}
    for name, tbps in figures.items():
        inst = catalog.get(name)
        assert inst.accelerator is not None and inst.accelerator.mem_bw_tbps == tbps, name
        assert inst.sources.get("accelerator.mem_bw_tbps"), name
