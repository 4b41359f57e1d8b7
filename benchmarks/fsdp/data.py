"""Token batches: synthetic and seeded, or windows of a local file of token ids.

Row i of the global batch of step s is a function of (seed, s, i) alone, and each rank builds
only its own contiguous slice of rows: no rank pays for the whole global batch (at 1,024 ranks
that was over 100 ms a step), the data a run sees does not depend on the world size, and a
resumed run picks up at the right place from the step number alone.
"""

from __future__ import annotations

import mmap
import warnings
from pathlib import Path

import torch

from benchmarks.fsdp.chatdata import DataError

_DTYPES = {".bin": torch.uint16, ".u16": torch.uint16, ".u32": torch.uint32}


class TokenBatches:
    """Rows of the global batch ``(batch_size, seq_len + 1)`` of step s; this rank's inputs and
    targets. Subclasses say how to build any range of rows."""

    def __init__(self, batch_size: int, seq_len: int, rank: int, world_size: int):
        if batch_size % world_size:
            raise ValueError(
                f"global batch size {batch_size} is not divisible by the world size "
                f"{world_size}; pick a multiple of {world_size}"
            )
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.rows = slice(rank * batch_size // world_size, (rank + 1) * batch_size // world_size)

    def build_rows(self, step: int, rows: range) -> torch.Tensor:
        """Rows ``rows`` of the global batch of ``step``, int64 ``(len(rows), seq_len + 1)``."""
        raise NotImplementedError

    def global_batch(self, step: int) -> torch.Tensor:
        return self.build_rows(step, range(self.batch_size))

    def local_rows(self, step: int) -> torch.Tensor:
        return self.build_rows(step, range(self.rows.start, self.rows.stop))

    def local_batch(self, step: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self.local_rows(step)
        if device.type == "cuda":
            rows = rows.pin_memory()  # so the copy below is asynchronous
        rows = rows.to(device, torch.long, non_blocking=True)
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

    def row_seed(self, step: int, row: int) -> int:
        # odd 64-bit multipliers: distinct (seed, step, row) give distinct generator seeds
        mixed = (self.seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9
                 + row * 0x94D049BB133111EB)
        return mixed % (1 << 63)

    def build_rows(self, step: int, rows: range) -> torch.Tensor:
        starts, strides = [], []
        for row in rows:
            gen = torch.Generator().manual_seed(self.row_seed(step, row))
            starts.append(torch.randint(self.vocab_size, (1,), generator=gen))
            strides.append(torch.randint(1, 8, (1,), generator=gen))
        positions = torch.arange(self.seq_len + 1).unsqueeze(0)
        start = torch.stack(starts) if starts else torch.zeros(0, 1, dtype=torch.long)
        stride = torch.stack(strides) if strides else torch.zeros(0, 1, dtype=torch.long)
        return (start + stride * positions) % self.vocab_size

    def describe(self) -> dict[str, str | int]:
        return {"source": "synthetic", "seed": self.seed}


def load_tokens(path: Path, dtype: str | None = None) -> torch.Tensor:
    """A 1-D tensor of token ids from ``.pt`` (a saved tensor) or a raw little-endian binary
    of uint16 (``.bin``, ``.u16``) or uint32 (``.u32``); ``dtype`` overrides the suffix."""
    if path.suffix == ".pt" and dtype is None:
        tokens = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(tokens, torch.Tensor):
            raise DataError(f"{path}: expected a saved tensor of token ids")
        return tokens.flatten()
    if dtype is not None:
        torch_dtype = {"uint16": torch.uint16, "uint32": torch.uint32}.get(dtype)
        if torch_dtype is None:
            raise ValueError(f"unknown token dtype {dtype!r}; use uint16 or uint32")
    elif path.suffix in _DTYPES:
        torch_dtype = _DTYPES[path.suffix]
    else:
        raise DataError(f"{path}: unknown token file type; use .pt, .bin/.u16 or .u32")
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
            raise DataError(f"{path}: {len(self.tokens)} tokens, need at least {seq_len + 1}")

    def build_rows(self, step: int, rows: range) -> torch.Tensor:
        width = self.seq_len + 1
        first = step * self.batch_size
        windows = ((first + i) % self.windows for i in rows)
        return torch.stack([self.tokens[w * width:(w + 1) * width].to(torch.int64)
                            for w in windows])

    def describe(self) -> dict[str, str | int]:
        return {"source": "file", "path": str(self.path), "tokens": len(self.tokens)}
