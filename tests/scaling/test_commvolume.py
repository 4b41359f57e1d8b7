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


def test_groups_inside_a_node_use_nvlink_and_groups_across_nodes_the_network() -> None:
    shape = shape_of(preset("8b"))
    assert {t.link for t in fsdp_step(shape, world=8, ranks_per_node=8)} == {"intra-node"}
    assert {t.link for t in fsdp_step(shape, world=16, ranks_per_node=8)} == {"inter-node"}
    hsdp = fsdp_step(shape, world=32, ranks_per_node=8, hsdp=True)
    assert [t.link for t in hsdp] == ["intra-node"] * 3 + ["inter-node"]


def test_each_collective_at_its_own_busbw_and_shards_in_a_node_at_one_nodes(tmp_path) -> None:
    """A stored record's all_gather and reduce_scatter busbw each price their own transfers
    (the prediction used to charge every transfer at the best all_gather figure), and an
    HSDP run's shard groups, inside a node, the stored 1-node figures."""
    from tests.results import records
    from toolkit.results.scaling import busbw_for
    from toolkit.results.store import ResultStore

    def sweep(nodes: int, rs_scale: float) -> dict:
        rec = records.collectives_record()
        rec["metrics"]["collectives"] = [
            records.collectives_block("all_gather"),
            records.collectives_block("reduce_scatter", lambda _s: rs_scale)]
        rec["cluster"]["nodes"] = nodes
        rec["id"] = f"{nodes:032x}"
        return rec

    with ResultStore(tmp_path / "r.db") as store:
        store.add(sweep(2, 0.25))  # across nodes: reduce_scatter at a quarter of its peak
        fsdp = {"kind": "fsdp", "cluster": records.cluster(), "params": {"nodes": 2}}
        bw = busbw_for(fsdp, store)
        assert bw is not None and set(bw.per_collective) == {"all_gather", "reduce_scatter"}
        ag, rs = bw.per_collective["all_gather"], bw.per_collective["reduce_scatter"]
        assert rs < ag / 3 and bw.intra_node == {}
        plain = fsdp_step(shape_of(preset("8b")), world=16, ranks_per_node=8)
        assert step_seconds(plain, bw.of) == pytest.approx(
            sum(t.bus_bytes for t in plain if t.collective == "all_gather") / (ag * 1e9)
            + sum(t.bus_bytes for t in plain if t.collective == "reduce_scatter") / (rs * 1e9))
        assert step_seconds(plain, bw.of) > 2 * step_seconds(plain, ag)

        store.add(sweep(1, 1.0))  # one node: NVLink, reduce_scatter at its full figure
        bw = busbw_for(fsdp, store)
        assert bw is not None and bw.intra_node["reduce_scatter"] > 3 * rs
        hsdp = fsdp_step(shape_of(preset("8b")), world=16, ranks_per_node=8, hsdp=True)
        shard_rs = next(t for t in hsdp if t.collective == "reduce_scatter")
        replica = hsdp[-1]
        assert bw.of(shard_rs) == bw.intra_node["reduce_scatter"]
        assert bw.of(replica) == ag  # no stored all_reduce: the first figure it has
