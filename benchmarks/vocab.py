"""Names and sizes that both sides of a collective benchmark speak: collective names and
their aliases, nccl-tests' bus-bandwidth factors, byte sizes written ``64K`` or ``1G``.

Both sides import this module: the node side (:mod:`benchmarks.collectives`, the torch
sweep) and the driver side (:mod:`toolkit.bench.nccl`'s parsers, checks and commands,
:mod:`toolkit.bench.collectives`). Standard library only, so that the driver reads it
without torch and a lean node image carries it.
"""

from __future__ import annotations

# nccl-tests names; the torch spellings are accepted as aliases.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce",
               "sendrecv", "gather", "scatter", "hypercube")
ALIASES = {
    "allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
    "all_to_all": "alltoall", "all_to_all_single": "alltoall", "all_gather_into_tensor":
    "all_gather", "reduce_scatter_tensor": "reduce_scatter", "send_recv": "sendrecv",
}
# what the torch sweep measures
SWEEP_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast")


def canonical_collective(name: str) -> str:
    """``all_to_all`` -> ``alltoall``, ``all_reduce_perf`` -> ``all_reduce``; else ValueError."""
    key = name.strip().lower().removesuffix("_perf").replace("-", "_")
    key = ALIASES.get(key, key)
    if key not in COLLECTIVES:
        raise ValueError(f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}")
    return key


def busbw_factor(collective: str, nranks: int) -> float:
    """nccl-tests' bus-bandwidth factor: busbw = algbw x factor (doc/PERFORMANCE.md)."""
    n = nranks
    c = canonical_collective(collective)
    if n < 1:
        raise ValueError("nranks must be >= 1")
    if c == "all_reduce":
        return 2 * (n - 1) / n
    if c in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def parse_bytes(text: str) -> int:
    """``8``, ``64K``, ``16M``, ``2G`` (powers of 1024, as nccl-tests' -b/-e read them)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in "KMGT" else t
    if not digits.isdigit():
        raise ValueError(f"not a byte size: {text!r}")
    return int(digits) * mult


def sweep_sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of two from min to max (min rounded up to a power of two)."""
    size = 1
    while size < max(1, min_bytes):
        size <<= 1
    sizes = []
    while size <= max_bytes:
        sizes.append(size)
        size <<= 1
    return sizes
