"""How many bytes FSDP moves per training step, and how long that takes at a bus bandwidth.

Pure arithmetic, no torch. The layout is the one ``pctk bench fsdp`` builds
(:mod:`benchmarks.fsdp.parallelize`): ``fully_shard`` on each transformer block, then on the
root (input embedding, final norm, output projection). Per step, with P_b a block's
parameters, P_root the root's, L blocks:

- forward: each block and the root all-gather their parameters in the compute dtype
  (bf16 on GPUs, fp32 on CPUs): ``(L·P_b + P_root)·b_param`` bytes;
- backward: the blocks resharded after forward are gathered again; the last block is not
  (``reshard_after_forward=False``, it is needed at once) and neither is the root (FSDP2
  keeps the root gathered): ``(L-1)·P_b·b_param``;
- gradients: one reduce-scatter per group in the reduce dtype (fp32): ``(L·P_b + P_root)·4``;
- HSDP (``--hsdp``): the gathers and reduce-scatters stay inside a node (the shard group);
  then each rank all-reduces its gradient shard across the nodes (the replica group):
  ``(L·P_b + P_root)/ranks_per_node·4`` bytes over ``nodes`` ranks.

``size_bytes`` is the collective's buffer as nccl-tests counts it (an all-gather's output,
a reduce-scatter's input); the bytes that cross each rank's link are ``size × busbw
factor`` (:func:`benchmarks.vocab.busbw_factor`), so the time at a bus bandwidth B is
``size × factor / B``.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.fsdp.config import ModelArgs
from benchmarks.vocab import busbw_factor

REDUCE_BYTES = 4  # gradients are reduced in fp32 (MixedPrecisionPolicy reduce_dtype)


def block_params(args: ModelArgs) -> int:
    """One transformer block: wq, wk, wv, wo, SwiGLU w1 w2 w3, two RMSNorm weights."""
    head_dim = args.head_dim
    attention = 2 * args.dim * args.n_heads * head_dim + 2 * args.dim * args.n_kv_heads * head_dim
    return attention + 3 * args.dim * args.ffn_dim + 2 * args.dim


def root_params(args: ModelArgs) -> int:
    """The root's own group: input embedding, final norm, untied output projection."""
    return 2 * args.vocab_size * args.dim + args.dim


@dataclass(frozen=True)
class Transfer:
    """One kind of collective in a step, summed over its calls."""

    phase: str  # "forward all-gather", ...
    collective: str  # nccl-tests name
    size_bytes: int  # summed over the calls of this step
    ranks: int  # ranks in the group it runs over

    @property
    def factor(self) -> float:
        return busbw_factor(self.collective, self.ranks) if self.ranks > 1 else 0.0

    @property
    def bus_bytes(self) -> float:
        """Bytes through each rank's link (the size times the busbw factor)."""
        return self.size_bytes * self.factor

    def seconds(self, busbw_gb_per_s: float) -> float:
        return self.bus_bytes / (busbw_gb_per_s * 1e9) if busbw_gb_per_s > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"phase": self.phase, "collective": self.collective,
                "size_bytes": self.size_bytes, "ranks": self.ranks, "factor": self.factor,
                "bus_bytes": self.bus_bytes}


def fsdp_step(args: ModelArgs, *, world: int, ranks_per_node: int, hsdp: bool = False,
              param_bytes: int = 2) -> list[Transfer]:
    """The transfers of one training step of every rank (see the module docstring)."""
    total = args.n_layers * block_params(args) + root_params(args)
    regathered = (args.n_layers - 1) * block_params(args)
    shard = ranks_per_node if hsdp else world
    out = [
        Transfer("forward all-gather", "all_gather", total * param_bytes, shard),
        Transfer("backward all-gather", "all_gather", regathered * param_bytes, shard),
        Transfer("gradient reduce-scatter", "reduce_scatter", total * REDUCE_BYTES, shard),
    ]
    if hsdp:
        replicas = world // ranks_per_node if ranks_per_node else 1
        out.append(Transfer("HSDP replica all-reduce", "all_reduce",
                            total * REDUCE_BYTES // max(1, ranks_per_node), replicas))
    return out


def step_seconds(transfers: list[Transfer], busbw_gb_per_s: float) -> float:
    """Time of every transfer, one after another, at one bus bandwidth."""
    return sum(t.seconds(busbw_gb_per_s) for t in transfers)
