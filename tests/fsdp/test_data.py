"""Each rank builds only its own rows, and they are the rows of the global batch."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch

from benchmarks.fsdp.data import FileBatches, SyntheticBatches, TokenBatches

BATCH, SEQ, VOCAB = 8, 16, 512


def synthetic(rank: int, world: int) -> SyntheticBatches:
    return SyntheticBatches(VOCAB, 3, BATCH, SEQ, rank, world)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.u16"  # five steps' worth and a ragged tail, so windows wrap
    tokens = [(i * 7) % VOCAB for i in range(5 * (SEQ + 1) * BATCH + 7)]
    path.write_bytes(struct.pack(f"<{len(tokens)}H", *tokens))
    return path


@pytest.mark.parametrize("world", [1, 2, 4, 8])
@pytest.mark.parametrize("source", ["synthetic", "file"])
def test_rank_rows_are_the_global_batch_rows(world: int, source: str, token_file: Path) -> None:
    def make(rank: int, w: int) -> TokenBatches:
        if source == "file":
            return FileBatches(token_file, BATCH, SEQ, rank, w)
        return synthetic(rank, w)

    for step in (1, 2, 37):
        single = make(0, 1).global_batch(step)  # one process, the whole batch
        assert single.shape == (BATCH, SEQ + 1)
        per_rank = [make(rank, world).local_rows(step) for rank in range(world)]
        assert all(r.shape == (BATCH // world, SEQ + 1) for r in per_rank)
        assert torch.equal(torch.cat(per_rank), single)
        inputs, targets = make(world - 1, world).local_batch(step, torch.device("cpu"))
        assert torch.equal(inputs, single[-(BATCH // world):, :-1])
        assert torch.equal(targets, single[-(BATCH // world):, 1:])

def test_synthetic_rows_differ_between_rows_and_steps() -> None:
    a, b = synthetic(0, 1).global_batch(1), synthetic(0, 1).global_batch(2)
    assert len({tuple(r.tolist()) for r in a}) == BATCH  # no two rows alike
    assert not torch.equal(a, b)
    assert int(a.max()) < VOCAB and int(a.min()) >= 0
    other_seed = SyntheticBatches(VOCAB, 4, BATCH, SEQ, 0, 1).global_batch(1)
    assert not torch.equal(a, other_seed)

def test_a_rank_builds_only_its_rows() -> None:
    built: list[range] = []

    class Counting(SyntheticBatches):
        def build_rows(self, step: int, rows: range) -> torch.Tensor:
            built.append(rows)
            return super().build_rows(step, rows)

    Counting(VOCAB, 0, 64, SEQ, rank=5, world_size=8).local_batch(1, torch.device("cpu"))
    assert built == [range(40, 48)]
