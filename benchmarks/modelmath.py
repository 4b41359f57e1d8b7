"""The arithmetic of a Llama-style model shape, in one place and without torch: parameters by
group, FLOPs per token (training, and the forward pass of inference), the memory an FSDP2
training run needs per GPU, the bytes FSDP moves per step, the bytes inference reads
(weights, KV cache) and what a million generated tokens cost.

Both sides use it: the node (``benchmarks.fsdp.train`` counts MFU and picks its GPU defaults
with it, benchmarks/fsdp/defaults.py; benchmarks/inference/roofline.py bounds decode and
prefill with it) and the driver (``pctk plan`` sizes clusters with it, toolkit/plan;
``pctk diagnose`` and ``pctk bench scaling`` predict communication with it,
toolkit/results; ``pctk bench inference`` picks its tensor-parallel size with it), so the
figure the planner promises and the one a run reports come from the same formula. The
parameter counts are checked against a real :class:`benchmarks.fsdp.model.Transformer`
(:func:`benchmarks.fsdp.model.count_params`) in tests/test_modelmath.py.

The shape is the one ``pctk bench fsdp`` builds (benchmarks/fsdp/model.py): grouped-query
attention without biases, a SwiGLU MLP, an RMSNorm before each, a final RMSNorm and an output
head not tied to the input embedding. Units: parameters and FLOPs as counts, memory in bytes
(GiB = 2^30 bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.fsdp.config import ModelArgs
from benchmarks.vocab import busbw_factor

GIB = 2**30


# --- shape and parameters -----------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """What the arithmetic needs of a model: parameter counts and, when known, its shape."""

    params: int  # all parameters
    params_non_embedding: int  # without the input embedding (a lookup, not a matmul)
    layers: int | None = None
    dim: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    ffn_dim: int | None = None
    vocab: int | None = None

    @property
    def head_dim(self) -> int | None:
        return self.dim // self.heads if self.dim and self.heads else None

    @property
    def has_attention_shape(self) -> bool:
        return bool(self.layers and self.dim and self.heads)

    @property
    def embedding_params(self) -> int:
        """The input embedding: vocabulary x dim."""
        return self.params - self.params_non_embedding

    @property
    def block_params(self) -> int:
        """Parameters of one transformer block (the unit FSDP gathers), or an even share."""
        if self.layers and self.dim and self.heads and self.ffn_dim:
            return block_params(self.dim, self.heads, self.kv_heads or self.heads, self.ffn_dim)
        return self.params_non_embedding // self.layers if self.layers else 0

    @property
    def root_params(self) -> int:
        """Parameters outside the blocks: the root FSDP group (input embedding, final norm,
        output head); without a block shape, the input embedding alone."""
        return self.params - self.layers * self.block_params if self.layers else \
            self.params - self.params_non_embedding


def block_params(dim: int, heads: int, kv_heads: int, ffn_dim: int) -> int:
    """One transformer block: wq, wk, wv, wo, SwiGLU w1 w2 w3, two RMSNorm weights."""
    head_dim = dim // heads
    attention = dim * heads * head_dim * 2 + dim * kv_heads * head_dim * 2  # wq wo, wk wv
    return attention + 3 * dim * ffn_dim + 2 * dim


def shape_of(args: ModelArgs) -> Shape:
    """Parameter counts of a Llama-style preset (untied embeddings, as the benchmark builds)."""
    embedding = args.vocab_size * args.dim
    blocks = args.n_layers * block_params(args.dim, args.n_heads, args.n_kv_heads, args.ffn_dim)
    total = embedding + blocks + args.dim + args.dim * args.vocab_size  # final norm, output
    return Shape(total, total - embedding, args.n_layers, args.dim, args.n_heads,
                 args.n_kv_heads, args.ffn_dim, args.vocab_size)


# --- FLOPs per token ----------------------------------------------------------------------

def training_flops_per_token(shape: Shape, seq_len: int, attention: bool = True) -> int:
    """Training FLOPs (forward and backward) per token, torchtitan's convention:
    ``6·N + 12·L·H·d_head·T``.

    N counts the parameters without the input embedding (a lookup, not a matmul), L the
    layers, H the query heads, d_head the head size and T the sequence length. 6N is forward
    (2N) plus backward (4N) of the matmuls; the second term is the attention scores and their
    weighted sum, also forward plus backward, over the whole T×T square: no halving for the
    causal mask (as torchtitan and PaLM count it, Chowdhery et al. 2022, arXiv 2204.02311,
    appendix B), so MFU figures compare across frameworks. ``attention=False``, or a shape
    without layers, dim and heads, gives 6N alone (Kaplan et al. 2020, arXiv 2001.08361).
    """
    base = 6 * shape.params_non_embedding
    if not attention or not shape.has_attention_shape:
        return base
    return base + 12 * _attention_width(shape) * seq_len


def forward_flops_per_token(shape: Shape, context: int) -> int:
    """Forward FLOPs of one token that attends to ``context`` tokens: ``2·N + 4·L·H·d_head·C``.

    2N is the matmuls once; per layer and query head, the scores q·Kᵀ over the C positions and
    their weighted sum of V take 2·d_head·C each. A decode step's token attends to the
    sequence's cached tokens (benchmarks/inference/roofline.py). At C = T this is a third of
    :func:`training_flops_per_token` (the backward pass costs twice the forward).
    """
    return 2 * shape.params_non_embedding + 4 * _attention_width(shape) * context


def prefill_flops(shape: Shape, prompt_len: int) -> int:
    """Forward FLOPs of a whole prompt of P tokens under a causal mask: token i attends to i
    tokens, so the prompt costs the sum of :func:`forward_flops_per_token` for i = 1..P,
    ``2·N·P + 4·L·H·d_head·P(P+1)/2``. A kernel that skips the masked half (FlashAttention,
    ``scaled_dot_product_attention(is_causal=True)``) does that work and no more."""
    attention = 4 * _attention_width(shape)
    return 2 * shape.params_non_embedding * prompt_len + \
        attention * prompt_len * (prompt_len + 1) // 2


def _attention_width(shape: Shape) -> int:
    """L·H·d_head, what the attention FLOPs of one token grow by per position attended to."""
    if not (shape.layers and shape.heads and shape.head_dim):
        raise ValueError("the attention FLOPs need the shape's layers, dim and heads")
    return shape.layers * shape.heads * shape.head_dim


# --- training memory per GPU --------------------------------------------------------------
# The layout ``pctk bench fsdp`` trains with: fp32 parameters, fp32 gradients and AdamW's two
# fp32 moments sharded over the shard group, bf16 compute copies of the blocks being gathered,
# the root group kept whole, bf16 activations (see :func:`memory`).

# bytes per parameter of the sharded training state (pctk bench fsdp: the model is built in
# fp32, FSDP2 computes in bf16 and reduces gradients in fp32, AdamW keeps two fp32 moments)
PARAM_BYTES = 4
GRAD_BYTES = 4
OPTIM_BYTES = 8
ACT_BYTES = 2  # bf16 activations
LOGIT_BYTES = 2 + 4  # bf16 logits and the fp32 copy cross-entropy computes in
# the root group (the model's own fully_shard: input embedding, final norm, output head) is not
# resharded after forward (FSDP2 leaves the root's parameters gathered for the backward that
# follows at once): its bf16 parameters and, from backward on, their bf16 gradients stay whole
ROOT_BYTES = 2 + 2


def activation_bytes_per_token_per_layer(shape: Shape) -> int:
    """bf16 tensors one Llama block keeps for its backward, per token.

    Saved inputs of the two RMSNorms and their outputs (4·h), q k v after rotary
    embeddings (h + 2·kv·d_head), the attention output (h), the residual sum (h), the
    SwiGLU gate and up projections, the SiLU and the product (4·f): with SDPA's fused
    attention the T×T score matrix is never stored. Korthikanti et al. 2022 (arXiv
    2205.05198) count 34·h for a GPT block with a 4h MLP; this is the Llama form.
    """
    assert shape.dim and shape.ffn_dim
    kv = (shape.kv_heads or shape.heads or 1) * (shape.head_dim or 0)
    return ACT_BYTES * (6 * shape.dim + 2 * kv + 4 * shape.ffn_dim)


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU at one shard size."""

    shard: int
    parameters: float
    gradients: float
    optimizer: float
    gathered: float  # bf16 copies of the blocks being computed, their unsharded gradients
    root: float  # the root group, kept whole from forward through backward (ROOT_BYTES)
    activations: float  # without activation checkpointing
    activations_ac: float  # with activation checkpointing per block

    def total(self, ac: bool) -> float:
        return (self.parameters + self.gradients + self.optimizer + self.gathered + self.root
                + (self.activations_ac if ac else self.activations))

    def to_dict(self, usable: float) -> dict[str, object]:
        gib = {k: round(v / GIB, 2) for k, v in (
            ("parameters", self.parameters), ("gradients", self.gradients),
            ("optimizer_state", self.optimizer), ("gathered_blocks", self.gathered),
            ("root_group", self.root),
            ("activations_no_ac", self.activations),
            ("activations_ac", self.activations_ac))}
        return {"shard_size": self.shard, "gib": gib,
                "total_gib_no_ac": round(self.total(False) / GIB, 2),
                "total_gib_ac": round(self.total(True) / GIB, 2),
                "fits_no_ac": self.total(False) <= usable,
                "fits_ac": self.total(True) <= usable}


def memory(shape: Shape, shard: int, seq_len: int, micro_batch: int) -> Memory:
    """Memory per GPU with the training state sharded over ``shard`` GPUs.

    States: fp32 parameters, fp32 gradients, AdamW's two fp32 moments, each divided by the
    shard size. Gathered: two blocks' bf16 parameters (the one computing and the one
    prefetched) and one block's fp32 unsharded gradients before its reduce-scatter. Root: the
    root group's bf16 parameters and gradients (:data:`ROOT_BYTES`), unsharded through
    backward whatever the shard size.
    Activations: every block's saved tensors without activation checkpointing; with it, each
    block's bf16 input plus one block's tensors recomputed during its backward. Both add the
    logits (bf16 and the fp32 copy of cross-entropy) when the vocabulary is known.
    """
    if shard < 1:
        raise ValueError(f"shard size must be at least 1 (got {shard})")
    p = shape.params
    blk = shape.block_params
    gathered = blk * (2 * 2 + 4)
    tokens = seq_len * micro_batch
    logits = tokens * shape.vocab * LOGIT_BYTES if shape.vocab else 0
    full = ac = 0
    if shape.layers and shape.dim and shape.ffn_dim:
        per_layer = activation_bytes_per_token_per_layer(shape) * tokens
        full = shape.layers * per_layer + logits
        ac = shape.layers * ACT_BYTES * shape.dim * tokens + per_layer + logits
    return Memory(shard, PARAM_BYTES * p / shard, GRAD_BYTES * p / shard,
                  OPTIM_BYTES * p / shard, gathered, float(ROOT_BYTES * shape.root_params),
                  float(full), float(ac))


# --- FSDP communication per step ----------------------------------------------------------

REDUCE_BYTES = 4  # gradients are reduced in fp32 (MixedPrecisionPolicy reduce_dtype)


INTRA_NODE = "intra-node"  # a group inside one node: NVLink
INTER_NODE = "inter-node"  # a group across nodes: the network (EFA)


@dataclass(frozen=True)
class Transfer:
    """One kind of collective in a step, summed over its calls."""

    phase: str  # "forward all-gather", ...
    collective: str  # nccl-tests name
    size_bytes: int  # summed over the calls of this step
    ranks: int  # ranks in the group it runs over
    link: str = INTER_NODE  # INTRA_NODE when the group is one node's GPUs

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
                "size_bytes": self.size_bytes, "ranks": self.ranks, "link": self.link,
                "factor": self.factor, "bus_bytes": self.bus_bytes}


def fsdp_step(shape: Shape, *, world: int, ranks_per_node: int, hsdp: bool = False,
              param_bytes: int = 2) -> list[Transfer]:
    """The transfers of one training step of every rank.

    The layout is the one ``pctk bench fsdp`` builds (:mod:`benchmarks.fsdp.parallelize`):
    ``fully_shard`` on each transformer block, then on the root (input embedding, final norm,
    output projection). Per step, with P_b a block's parameters, P_root the root's, L blocks:

    - forward: each block and the root all-gather their parameters in the compute dtype
      (bf16 on GPUs, fp32 on CPUs: ``param_bytes``): ``(L·P_b + P_root)·b_param`` bytes;
    - backward: the blocks resharded after forward are gathered again; the last block is not
      (``reshard_after_forward=False``, it is needed at once) and neither is the root (FSDP2
      keeps the root gathered): ``(L-1)·P_b·b_param``;
    - gradients: one reduce-scatter per group in the reduce dtype (fp32):
      ``(L·P_b + P_root)·4``;
    - HSDP (``hsdp``): the gathers and reduce-scatters stay inside a node (the shard group);
      then each rank all-reduces its gradient shard across the nodes (the replica group):
      ``(L·P_b + P_root)/ranks_per_node·4`` bytes over ``nodes`` ranks.

    A group of one node's ranks (HSDP's shard groups, or plain FSDP on one node) runs over
    NVLink (``link`` INTRA_NODE); a group across nodes over the network (INTER_NODE).

    ``size_bytes`` is the collective's buffer as nccl-tests counts it (an all-gather's output,
    a reduce-scatter's input); the bytes that cross each rank's link are ``size × busbw
    factor`` (:func:`benchmarks.vocab.busbw_factor`), so the time at a bus bandwidth B is
    ``size × factor / B``.
    """
    if not shape.layers:
        raise ValueError("FSDP's transfers need the shape's layers")
    total = shape.layers * shape.block_params + shape.root_params
    regathered = (shape.layers - 1) * shape.block_params
    shard = ranks_per_node if hsdp else world
    link = INTRA_NODE if shard <= max(1, ranks_per_node) else INTER_NODE
    out = [
        Transfer("forward all-gather", "all_gather", total * param_bytes, shard, link),
        Transfer("backward all-gather", "all_gather", regathered * param_bytes, shard, link),
        Transfer("gradient reduce-scatter", "reduce_scatter", total * REDUCE_BYTES, shard, link),
    ]
    if hsdp:
        replicas = world // ranks_per_node if ranks_per_node else 1
        out.append(Transfer("HSDP replica all-reduce", "all_reduce",
                            total * REDUCE_BYTES // max(1, ranks_per_node), replicas, INTER_NODE))
    return out


def step_seconds(transfers: list[Transfer],
                 busbw_gb_per_s: float | Callable[[Transfer], float]) -> float:
    """Time of every transfer, one after another: at one bus bandwidth, or at each transfer's
    own (``busbw_gb_per_s(transfer)``: by its collective and its link)."""
    if callable(busbw_gb_per_s):
        return sum(t.seconds(busbw_gb_per_s(t)) for t in transfers)
    return sum(t.seconds(busbw_gb_per_s) for t in transfers)


# --- inference bytes ----------------------------------------------------------------------

def kv_bytes_per_token(shape: Shape, dtype_bytes: int = 2) -> int:
    """K and V of every layer for one token of one sequence: ``2·L·kv_heads·d_head`` values."""
    if not (shape.layers and shape.head_dim):
        raise ValueError("the KV cache needs the shape's layers, dim and heads")
    kv_heads = shape.kv_heads or shape.heads or 0
    return 2 * shape.layers * kv_heads * shape.head_dim * dtype_bytes


def decode_weight_bytes(shape: Shape, dtype_bytes: int = 2) -> int:
    """Bytes of weights a decode step reads: every parameter but the input embedding, whose
    lookup reads one row per sequence, not the table."""
    return shape.params_non_embedding * dtype_bytes


def resident_weight_bytes(shape: Shape, dtype_bytes: int = 2, tp: int = 1) -> int:
    """Every weight held in memory, the input embedding included; with ``tp`` GPUs sharing
    the model (benchmarks/inference/tensor_parallel.py), one GPU's share: the embedding and
    the norms (two per block and the final one) stay whole on each."""
    if not (shape.layers and shape.dim):
        raise ValueError("the weights' split needs the shape's layers and dim")
    norms = (2 * shape.layers + 1) * shape.dim
    sharded = shape.params_non_embedding - norms
    return (sharded // tp + norms + shape.embedding_params) * dtype_bytes


# --- cost ---------------------------------------------------------------------------------

def usd_per_million_tokens(price_usd_per_hour: float | None, tokens_per_s: float
                           ) -> float | None:
    """What a million tokens cost at ``tokens_per_s`` when the hardware that makes them is
    paid ``price_usd_per_hour``; None without a price or without tokens."""
    if not price_usd_per_hour or tokens_per_s <= 0:
        return None
    return price_usd_per_hour / 3600 / tokens_per_s * 1e6
