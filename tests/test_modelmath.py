"""The model arithmetic (benchmarks/modelmath.py) against the model it describes: every
parameter group counted on a real :class:`benchmarks.fsdp.model.Transformer` and the KV bytes
of a real cache, both built on the meta device so that even 70B costs no memory, and the
FLOPs counts against each other (training is three forwards, prefill a sum of forwards). The
hand-worked figures for the Llama shapes are in tests/plan/test_arithmetic.py (parameters,
training FLOPs, memory per GPU) and tests/inference/test_roofline.py (decode and prefill)."""

from __future__ import annotations

import pytest

from benchmarks import modelmath as mm
from benchmarks.fsdp.config import PRESETS

torch = pytest.importorskip("torch")


def _counted(name: str) -> dict[str, int]:
    """Parameters of the benchmark's model by group, counted on its modules."""
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


@pytest.mark.parametrize(("name", "dtype", "size"), [("tiny", torch.float32, 4),
                                                     ("8b", torch.bfloat16, 2)])
def test_kv_bytes_per_token_are_the_caches_bytes(name: str, dtype: torch.dtype,
                                                 size: int) -> None:
    from benchmarks.fsdp.model import Transformer
    from benchmarks.inference.kvcache import KVCache

    with torch.device("meta"):
        model = Transformer(PRESETS[name])
    cache = KVCache.empty(model, 3, 14, dtype, torch.device("meta"))
    assert cache.nbytes == 3 * 14 * mm.kv_bytes_per_token(mm.shape_of(PRESETS[name]), size)
