"""FSDP communication per step for the Llama 3.1 8B shape (benchmarks/modelmath.py), against a
hand computation."""

from __future__ import annotations

import pytest

from benchmarks.fsdp.config import preset
from benchmarks.modelmath import fsdp_step, shape_of, step_seconds


def test_8b_fsdp_volumes_match_hand_computation() -> None:
    dim, layers, heads, kv_heads, ffn, vocab = 4096, 32, 32, 8, 14336, 128256
    head_dim = dim // heads  # 128
    block = (dim * dim + 2 * dim * kv_heads * head_dim + dim * dim  # wq, wk, wv, wo
             + 3 * dim * ffn + 2 * dim)  # w1 w2 w3, two norms
    assert block == 218_112_000
    root = vocab * dim + dim + dim * vocab  # embedding, final norm, output
    assert root == 1_050_677_248
    total = layers * block + root
    assert total == 8_030_261_248  # "8.03B", as the FLOPs test counts

    # 2 nodes x 8 GPUs, plain FSDP: every collective spans the 16 ranks
    world = 16
    fwd_ag = total * 2  # bf16 gather of every group
    bwd_ag = (layers - 1) * block * 2  # the last block and the root stay gathered
    rs = total * 4  # fp32 gradients
    assert (fwd_ag, bwd_ag, rs) == (16_060_522_496, 13_522_944_000, 32_121_044_992)
    ring = (world - 1) / world  # nccl-tests factor of all_gather and reduce_scatter
    bus = (fwd_ag + bwd_ag + rs) * ring
    assert bus == pytest.approx(57_847_979_520.0)  # 61,704,511,488 x 15/16

    got = fsdp_step(shape_of(preset("8b")), world=world, ranks_per_node=8)
    assert [(t.phase, t.size_bytes, t.ranks) for t in got] == [
        ("forward all-gather", fwd_ag, 16), ("backward all-gather", bwd_ag, 16),
        ("gradient reduce-scatter", rs, 16)]
    assert sum(t.bus_bytes for t in got) == pytest.approx(bus)
    # at 400 GB/s busbw: 57.848 GB / 400 GB/s = 0.14462 s per step
    assert step_seconds(got, 400.0) == pytest.approx(0.14462, rel=1e-4)


def test_8b_hsdp_adds_the_replica_all_reduce() -> None:
    total = 8_030_261_248
    got = fsdp_step(shape_of(preset("8b")), world=32, ranks_per_node=8, hsdp=True)
    assert [t.ranks for t in got] == [8, 8, 8, 4]  # shards in a node, 4 replicas
    replica = got[-1]
    assert replica.collective == "all_reduce"
    assert replica.size_bytes == total * 4 // 8 == 4_015_130_624  # each rank's fp32 shard
    assert replica.bus_bytes == pytest.approx(4_015_130_624 * 2 * 3 / 4)  # 2(n-1)/n, n=4


def test_one_rank_moves_nothing() -> None:
    got = fsdp_step(shape_of(preset("1b")), world=1, ranks_per_node=1)
    assert step_seconds(got, 100.0) == 0.0
