"""The model arithmetic (benchmarks/modelmath.py) against the model it describes: every
parameter group counted on a real :class:`benchmarks.fsdp.model.Transformer`, built on the
meta device so that even 70B costs no memory. The hand-worked figures for the Llama shapes
are in tests/plan/test_arithmetic.py (parameters, training FLOPs, memory per GPU)."""

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
