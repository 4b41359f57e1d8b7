"""Token batches: synthetic and seeded, or windows of a local file of token ids.

Both sources build the *global* batch for a step from (seed, step) alone and hand each rank
its contiguous slice of rows, so the data a run sees does not depend on the world size and
a resumed run picks up at the right place from the step number alone.
"""

from __future__ import annotations

import mmap
import warnings
from pathlib import Path

import torch

_DTYPES = {".bin": torch.uint16, ".u16": torch.uint16, ".u32": torch.uint32}


class TokenBatches:
    """Global batch ``(batch_size, seq_len + 1)`` of step s; inputs and targets per rank."""

    def __init__(self, batch_size: int, seq_len: int, rank: int, world_size: int):
        if batch_size % world_size:
            raise ValueError(
                f"global batch size {batch_size} is not divisible by the world size "
                f"{world_size}; pick a multiple of {world_size}"
            )
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.rows = slice(rank * batch_size // world_size, (rank + 1) * batch_size // world_size)

    def global_batch(self, step: int) -> torch.Tensor:
        raise NotImplementedError

    def local_batch(self, step: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self.global_batch(step)[self.rows].to(device, torch.long, non_blocking=True)
        return rows[:, :-1], rows[:, 1:]

    def describe(self) -> dict[str, str | int]:
        raise NotImplementedError


class SyntheticBatches(TokenBatches):
    """Each row counts up from a random start by a random stride (mod vocab): random enough to
    cost real compute, regular enough that the loss falls and a broken run shows."""

    def __init__(self, vocab_size: int, seed: int, batch_size: int, seq_len: int,
                 rank: int, world_size: int):
        super().__init__(batch_size, seq_len, rank, world_size)
        self.vocab_size = vocab_size
        self.seed = seed

    def global_batch(self, step: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        start = torch.randint(self.vocab_size, (self.batch_size, 1), generator=gen)
        stride = torch.randint(1, 8, (self.batch_size, 1), generator=gen)
        positions = torch.arange(self.seq_len + 1).unsqueeze(0)
        return (start + stride * positions) % self.vocab_size

    def describe(self) -> dict[str, str | int]:
        return {"source": "synthetic", "seed": self.seed}


def load_tokens(path: Path, dtype: str | None = None) -> torch.Tensor:
    """A 1-D tensor of token ids from ``.pt`` (a saved tensor) or a raw little-endian binary
    of uint16 (``.bin``, ``.u16``) or uint32 (``.u32``); ``dtype`` overrides the suffix."""
    if path.suffix == ".pt" and dtype is None:
        tokens = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(tokens, torch.Tensor):
            raise ValueError(f"{path}: expected a saved tensor of token ids")
        return tokens.flatten()
    if dtype is not None:
        torch_dtype = {"uint16": torch.uint16, "uint32": torch.uint32}.get(dtype)
        if torch_dtype is None:
            raise ValueError(f"unknown token dtype {dtype!r}; use uint16 or uint32")
    elif path.suffix in _DTYPES:
        torch_dtype = _DTYPES[path.suffix]
    else:
        raise ValueError(f"{path}: unknown token file type; use .pt, .bin/.u16 or .u32")
    with path.open("rb") as fh, warnings.catch_warnings():
        # a read-only mapping: torch warns that the buffer is not writable; we never write it
        warnings.simplefilter("ignore", UserWarning)
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        return torch.frombuffer(mapped, dtype=torch_dtype)


class FileBatches(TokenBatches):
    """Consecutive windows of seq_len + 1 tokens, row i of step s at window s·B + i (wrapping)."""

    def __init__(self, path: Path, batch_size: int, seq_len: int, rank: int, world_size: int,
                 dtype: str | None = None):
        super().__init__(batch_size, seq_len, rank, world_size)
        self.path = path
        self.tokens = load_tokens(path, dtype)
        self.windows = len(self.tokens) // (seq_len + 1)
        if self.windows < 1:
            raise ValueError(f"{path}: {len(self.tokens)} tokens, need at least {seq_len + 1}")

    def global_batch(self, step: int) -> torch.Tensor:
        width = self.seq_len + 1
        first = step * self.batch_size
        rows = [
            self.tokens[w * width:(w + 1) * width]
            for w in ((first + i) % self.windows for i in range(self.batch_size))
        ]
        return torch.stack([r.to(torch.int64) for r in rows])

    def describe(self) -> dict[str, str | int]:
        return {"source": "file", "path": str(self.path), "tokens": len(self.tokens)}
