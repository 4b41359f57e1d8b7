"""The planner's arithmetic (toolkit/plan/model.py, and benchmarks/modelmath.py for what it
shares with the node: parameters, FLOPs, memory per GPU) against cases worked out by hand,
step by step, below."""

from __future__ import annotations

import math

import pytest

from benchmarks import modelmath as mm
from benchmarks.fsdp.config import PRESETS, preset
from toolkit.plan import model as m
from toolkit.plan.model import PlanError

GIB = 2**30

# --- Llama 3.1 8B (the "8b" preset): dim 4096, 32 layers, 32 heads, 8 KV heads (head 128),
# SwiGLU 14,336, vocabulary 128,256, untied embeddings
#   one block:  wq + wo        2 * 4096 * 4096         =  33,554,432
#               wk + wv        2 * 4096 * 8 * 128      =   8,388,608
#               w1 + w2 + w3   3 * 4096 * 14336        = 176,160,768
#               two RMSNorms   2 * 4096                =       8,192
#                                                        218,112,000
#   32 blocks                                          = 6,979,584,000
#   embedding and output       2 * 128256 * 4096       = 1,050,673,152
#   final norm                                         =         4,096
#   all parameters                                     = 8,030,261,248   (Llama 3.1 8B: 8.03B)
#   without the input embedding  - 525,336,576         = 7,504,924,672
#   6N                                                 = 45,029,548,032
#   attention at T = 8192:  12 * 32 * 32 * 128 * 8192  = 12,884,901,888
#   FLOPs per token                                    = 57,914,449,920
P8 = 8_030_261_248
N8 = 7_504_924_672
FPT8_6N = 45_029_548_032
FPT8 = 57_914_449_920

# --- Llama 3.1 70B (the "70b" preset): dim 8192, 80 layers, 64 heads, 8 KV heads, SwiGLU
# 28,672, vocabulary 128,256
#   one block:  2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
#             = 134,217,728 + 16,777,216 + 704,643,072 + 16,384 = 855,654,400
#   80 blocks = 68,452,352,000; + 2 * 128256 * 8192 = 2,101,346,304; + 8192
#   all parameters = 70,553,706,496 (Llama 3.1 70B: 70.6B)
#   without the input embedding = 70,553,706,496 - 1,050,673,152 = 69,503,033,344
#   6N = 417,018,200,064; attention 12 * 80 * 64 * 128 * 8192 = 64,424,509,440
#   FLOPs per token = 481,442,709,504
P70 = 70_553_706_496
N70 = 69_503_033_344
FPT70 = 481_442_709_504


def test_parameter_counts_of_the_8b_and_70b_presets():
    s8, s70 = mm.shape_of(preset("8b")), mm.shape_of(preset("70b"))
    assert (s8.params, s8.params_non_embedding, s8.block_params) == (P8, N8, 218_112_000)
    assert (s70.params, s70.params_non_embedding, s70.block_params) == (P70, N70, 855_654_400)


@pytest.mark.parametrize("name", list(PRESETS))
def test_counts_match_the_torch_model_of_the_benchmark(name):
    torch = pytest.importorskip("torch")
    from benchmarks.fsdp.model import Transformer, count_params

    with torch.device("meta"):
        model = Transformer(preset(name))
    shape = mm.shape_of(preset(name))
    assert count_params(model) == (shape.params, shape.params_non_embedding)


def test_flops_per_token_with_and_without_the_attention_term():
    s8 = mm.shape_of(preset("8b"))
    assert mm.training_flops_per_token(s8, 8192) == FPT8
    assert mm.training_flops_per_token(s8, 8192, attention=False) == FPT8_6N
    # the attention term grows with the sequence: at T = 2048 it is a quarter of 12,884,901,888
    assert mm.training_flops_per_token(s8, 2048) == FPT8_6N + 3_221_225_472
    assert mm.training_flops_per_token(mm.shape_of(preset("70b")), 8192) == FPT70
    # a bare parameter count has no shape: 6N only, N as given
    assert mm.training_flops_per_token(mm.Shape(7_000_000_000, 7_000_000_000), 4096) == 42e9


def test_flops_count_the_parameters_the_benchmarks_model_has():
    torch = pytest.importorskip("torch")
    from benchmarks.fsdp.model import Transformer, count_params

    with torch.device("meta"):
        n = count_params(Transformer(preset("8b")))[1]
    assert n == N8
    s8 = mm.shape_of(preset("8b"))
    assert mm.training_flops_per_token(s8, 8192) == 6 * n + 12 * 32 * 32 * 128 * 8192


def test_gpu_hours():
    # 8B on 1e12 tokens: 57,914,449,920 * 1e12 = 5.791444992e22 FLOPs. An H100 at 40% MFU
    # does 989e12 * 0.4 = 3.956e14 FLOP/s: 5.791444992e22 / 3.956e14 = 146,396,486.1 s
    # = 40,665.69 GPU-hours
    assert m.gpu_hours(FPT8 * 1e12, 989, 0.40) == pytest.approx(40_665.69, abs=0.01)
    # the same work at 6N alone: 4.5029548032e22 / 3.956e14 = 113,825,955.6 s
    # = 31,618.32 GPU-hours
    assert m.gpu_hours(FPT8_6N * 1e12, 989, 0.40) == pytest.approx(31_618.32, abs=0.01)


def test_memory_per_gpu_for_8b_over_32_gpus():
    # fp32 parameters 4 * 8,030,261,248 / 32 = 1,003,782,656 bytes; fp32 gradients the same;
    # AdamW moments 8 * P / 32 = 2,007,565,312.
    # gathered: two blocks of bf16 parameters plus one block of fp32 gradients
    #   218,112,000 * (2*2 + 4) = 1,744,896,000
    # activations per token per layer, bf16: 2 * (6*4096 + 2*8*128 + 4*14336) = 167,936 bytes;
    #   at T = 8192, one sequence: 1,375,731,712 per layer, 44,023,414,784 for 32 layers;
    #   logits 8192 * 128256 * (2 + 4) = 6,304,038,912 -> 50,327,453,696 without AC
    # with AC: block inputs 32 * 2 * 4096 * 8192 = 2,147,483,648, one block recomputed
    #   1,375,731,712, logits 6,304,038,912 -> 9,827,254,272
    mem = mm.memory(mm.shape_of(preset("8b")), 32, 8192, 1)
    assert mem.parameters == mem.gradients == 1_003_782_656
    assert mem.optimizer == 2_007_565_312
    assert mem.gathered == 1_744_896_000
    assert mem.activations == 50_327_453_696
    assert mem.activations_ac == 9_827_254_272
    # the root group (embedding 128,256 x 4,096, output head the same, final norm 4,096 =
    #   1,050,677,248 parameters) stays whole through backward in bf16 with bf16 gradients:
    #   4 bytes each = 4,202,708,992 bytes (3.9 GiB) on every GPU, whatever the shard
    assert mem.root == 4_202_708_992
    assert mm.memory(mm.shape_of(preset("8b")), 1024, 8192, 1).root == 4_202_708_992
    assert mem.total(False) == (1_003_782_656 * 2 + 2_007_565_312 + 1_744_896_000
                                + 4_202_708_992 + 50_327_453_696)
    # states, gathered blocks and root: 2 * 1,003,782,656 + 2,007,565,312 + 1,744,896,000 +
    #   4,202,708,992 = 9,962,735,616; + 50,327,453,696 = 60,290,189,312 bytes = 56.15 GiB
    #   without AC; + 9,827,254,272 = 19,789,989,888 bytes = 18.43 GiB with AC
    assert mem.total(False) == 60_290_189_312
    assert mem.total(True) == 19_789_989_888
    assert mem.total(False) / GIB == pytest.approx(56.15, abs=0.01)


def test_memory_per_gpu_for_70b_fsdp_over_64_and_hsdp_over_8():
    # states 16 bytes * 70,553,706,496 = 1,128,859,303,936; / 64 = 17,638,426,624
    # gathered 855,654,400 * 8 = 6,845,235,200
    # activations per token per layer 2 * (6*8192 + 2*1024 + 4*28672) = 331,776;
    #   * 8192 * 80 = 217,432,719,360; logits 6,304,038,912 -> 223,736,758,272 without AC
    # with AC: 80 * 2 * 8192 * 8192 = 10,737,418,240 + 2,717,908,992 + 6,304,038,912
    #   = 19,759,366,144
    # root group: (128,256 x 8,192 x 2 + 8,192) x 4 bytes = 8,405,417,984 (7.83 GiB)
    shape = mm.shape_of(preset("70b"))
    fsdp = mm.memory(shape, 64, 8192, 1)
    assert fsdp.parameters + fsdp.gradients + fsdp.optimizer == 17_638_426_624
    assert fsdp.gathered == 6_845_235_200
    assert fsdp.activations == 223_736_758_272
    assert fsdp.activations_ac == 19_759_366_144
    assert fsdp.root == 8_405_417_984
    usable = 80 * GIB * 0.9  # an H100's 81,920 MiB less 10% headroom = 72 GiB
    # 17,638,426,624 + 6,845,235,200 + 8,405,417,984 + 19,759,366,144 = 52,648,445,952 bytes
    assert fsdp.total(True) == 52_648_445_952
    assert fsdp.total(True) / GIB == pytest.approx(49.03, abs=0.01)  # fits with AC
    assert fsdp.total(False) > usable  # not without
    # HSDP over one node of 8: the states alone are 1,128,859,303,936 / 8 = 131.4 GiB
    hsdp = mm.memory(shape, 8, 8192, 1)
    assert (hsdp.parameters + hsdp.gradients + hsdp.optimizer) / GIB == pytest.approx(131.4, 0.01)
    assert hsdp.total(True) > usable
    # the smallest shard of 64 GPUs that fits with AC: states/S + 35.0 GB <= 72 GiB
    # -> S >= 1,128,859,303,936 / (77,309,411,328 - 35,010,019,328) = 26.7 -> 32 (divides 64)
    assert m.smallest_shard(shape, 64, 8192, 1, usable, ac=True, gpus_per_node=8) == 32
    assert m.smallest_shard(shape, 64, 8192, 1, usable, ac=False, gpus_per_node=8) is None
    # 15 nodes of 8 (120 GPUs): the divisors of 120 from 26.7 up are 30, 40, 60, 120;
    # 30 GPUs is 3.75 nodes (a node split between two shard groups), 40 is 5 whole nodes
    assert m.smallest_shard(shape, 120, 8192, 1, usable, ac=True) == 30  # not node-aware
    assert m.smallest_shard(shape, 120, 8192, 1, usable, ac=True, gpus_per_node=8) == 40
    assert [s for s in (1, 2, 4, 8, 16, 24, 26, 40, 52) if m.node_aligned(s, 8)] == \
        [1, 2, 4, 8, 16, 24, 40]


def test_checkpoint_and_young_daly():
    # 8B: 12 bytes * 8,030,261,248 = 96,363,134,976 bytes
    assert m.checkpoint_bytes(mm.shape_of(preset("8b"))) == 96_363_134_976
    # C = 0.1 h, M = 20 h: sqrt(2 * 0.1 * 20) = 2 h
    assert m.young_daly_interval_h(0.1, 20) == pytest.approx(2.0)
    # 100 h of work: checkpoints take 0.1/2 = 5%, failures (2/2 + 0.25)/20 = 6.25%;
    # wall = 100 / (1 - 0.05 - 0.0625) = 112.676 h, 5.634 failures, 7.042 h lost
    o = m.overhead(100, 0.1, 20, 0.25)
    assert o.interval_h == pytest.approx(2.0)
    assert o.wall_h == pytest.approx(100 / 0.8875)
    assert o.failures == pytest.approx(100 / 0.8875 / 20)
    assert o.lost_to_failures_h == pytest.approx(100 / 0.8875 * 0.0625)
    assert math.isclose(o.checkpoint_h_total, 100 / 0.8875 * 0.05)


def test_a_job_that_fails_faster_than_it_checkpoints_has_no_plan():
    with pytest.raises(PlanError, match="nearly all its time"):
        m.overhead(100, 1.0, 1.5, 0.25)
