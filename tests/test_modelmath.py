"""The model arithmetic (benchmarks/modelmath.py) against the model it describes: every
parameter group counted on a real :class:`benchmarks.fsdp.model.Transformer` and the KV bytes
of a real cache, both built on the meta device so that even 70B costs no memory; the FLOPs
counts against each other (training is three forwards, prefill a sum of forwards); the cost
of a million tokens worked by hand. The hand-worked figures for the Llama shapes are in
tests/plan/test_arithmetic.py (parameters, training FLOPs, memory per GPU),
tests/inference/test_roofline.py (decode and prefill) and tests/scaling/test_commvolume.py
(FSDP's traffic)."""

from __future__ import annotations

import pytest

from benchmarks import modelmath as mm
from benchmarks.fsdp.config import PRESETS


def _counted(name: str) -> dict[str, int]:
    """Parameters of the benchmark's model by group, counted on its modules."""
    torch = pytest.importorskip("torch")
    from benchmarks.fsdp.model import Transformer, count_params

    with torch.device("meta"):
        model = Transformer(PRESETS[name])
    total, non_embedding = count_params(model)
    blocks = [sum(p.numel() for p in block.parameters()) for block in model.layers.values()]
    outside = {n: p.numel() for n, p in model.named_parameters() if not n.startswith("layers.")}
    assert set(outside) == {"tok_embeddings.weight", "norm.weight", "output.weight"}
    assert len(set(blocks)) == 1  # every block has the same shape
    return {"params": total, "non_embedding": non_embedding, "block": blocks[0],
            "embedding": outside["tok_embeddings.weight"], "root": sum(outside.values())}


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_parameter_group_is_the_models(name: str) -> None:
    counted = _counted(name)
    shape = mm.shape_of(PRESETS[name])
    assert (shape.params, shape.params_non_embedding) == \
        (counted["params"], counted["non_embedding"])
    assert shape.embedding_params == counted["embedding"]
    assert shape.block_params == counted["block"]
    assert shape.root_params == counted["root"]  # input embedding, final norm, output head


def test_a_bare_parameter_count_shares_the_blocks_evenly() -> None:
    # no block shape: the non-embedding parameters split over the layers, the root group is
    # the input embedding alone
    bare = mm.Shape(1_000_000, 900_000, layers=3)
    assert (bare.block_params, bare.root_params, bare.embedding_params) == \
        (300_000, 100_000, 100_000)
    assert mm.Shape(1_000_000, 900_000).block_params == 0


@pytest.mark.parametrize("name", ["tiny", "8b"])
def test_training_is_three_forwards_and_prefill_sums_the_causal_positions(name: str) -> None:
    shape = mm.shape_of(PRESETS[name])
    # backward costs twice the forward: 6N + 12·L·H·d_head·T = 3 · (2N + 4·L·H·d_head·T)
    assert mm.training_flops_per_token(shape, 512) == 3 * mm.forward_flops_per_token(shape, 512)
    # prompt token i attends to i tokens
    assert mm.prefill_flops(shape, 37) == sum(mm.forward_flops_per_token(shape, i)
                                              for i in range(1, 38))
    with pytest.raises(ValueError, match="layers, dim and heads"):
        mm.forward_flops_per_token(mm.Shape(shape.params, shape.params_non_embedding), 512)


@pytest.mark.parametrize(("name", "dtype", "size"), [("tiny", "float32", 4),
                                                     ("8b", "bfloat16", 2)])
def test_kv_bytes_per_token_are_the_caches_bytes(name: str, dtype: str, size: int) -> None:
    torch = pytest.importorskip("torch")
    from benchmarks.fsdp.model import Transformer
    from benchmarks.inference.kvcache import KVCache

    with torch.device("meta"):
        model = Transformer(PRESETS[name])
    cache = KVCache.empty(model, 3, 14, getattr(torch, dtype), torch.device("meta"))
    assert cache.nbytes == 3 * 14 * mm.kv_bytes_per_token(mm.shape_of(PRESETS[name]), size)


def test_cost_of_a_million_tokens() -> None:
    # a node at $98.32/h makes 2,500 tokens/s: 98.32 / 3600 = $0.027311 a second,
    # / 2500 = $1.0924e-5 a token, $10.9244 a million
    assert mm.usd_per_million_tokens(98.32, 2500.0) == pytest.approx(10.9244, abs=1e-4)
    assert mm.usd_per_million_tokens(None, 2500.0) is None  # no price, no figure
    assert mm.usd_per_million_tokens(98.32, 0.0) is None  # nothing came out
