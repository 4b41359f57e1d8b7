"""Tensor parallel inference across the GPUs of one node, Megatron-style (as vLLM shards a
Llama): each of ``size`` ranks holds

* ``wq``/``wk``/``wv`` for ``heads / size`` query and ``kv_heads / size`` KV heads (columns),
  and the matching input columns of ``wo`` (rows): attention is head-local, one all-reduce
  of ``wo``'s partial sums per layer;
* ``w1``/``w3`` for ``ffn_dim / size`` hidden units and those columns of ``w2``: one more
  all-reduce per layer;
* ``vocab / size`` rows of the output head: the logits are all-gathered (the vocabulary-
  parallel head);
* the norms, the rotary table and the input embedding whole (a lookup of ``batch`` rows per
  step: nothing to gain by sharding its reads).

So a decode step reads ``1 / size`` of the weights and of the KV cache on each GPU. ``size``
must divide the query heads, the KV heads, the hidden units and the vocabulary (KV heads are
not replicated). :func:`build` makes one rank's shard with random weights straight on its
device, no full model first (the point of sharding a shape that does not fit one GPU);
:func:`shard_of` cuts one from a full model (the tests' oracle: the sharded forward gives the
full model's logits, tests/inference/test_tensor_parallel.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from benchmarks.fsdp.config import ModelArgs
from benchmarks.fsdp.model import Transformer, TransformerBlock, rope_frequencies
from benchmarks.inference.roofline import tensor_parallel_problem as problem


@dataclass(frozen=True)
class Group:
    """This rank's place in its node's tensor-parallel group."""

    rank: int
    size: int
    group: Any = None  # torch.distributed ProcessGroup (None: the default group)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x, group=self.group)
        return x

    def all_gather_last(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's ``x`` side by side along the last dimension, in rank order."""
        parts = [torch.empty_like(x) for _ in range(self.size)]
        dist.all_gather(parts, x.contiguous(), group=self.group)
        return torch.cat(parts, dim=-1)


def _shrink(model: Transformer, size: int) -> None:
    """Replace every sharded Linear by one of its shard's shape (on the model's device) and
    set each attention's local head counts."""
    a = model.args
    hd = a.head_dim
    for block in model.layers.values():
        assert isinstance(block, TransformerBlock)
        attn, ff = block.attention, block.feed_forward
        heads, kv = a.n_heads // size, a.n_kv_heads // size
        attn.wq = nn.Linear(a.dim, heads * hd, bias=False)
        attn.wk = nn.Linear(a.dim, kv * hd, bias=False)
        attn.wv = nn.Linear(a.dim, kv * hd, bias=False)
        attn.wo = nn.Linear(heads * hd, a.dim, bias=False)
        attn.n_heads, attn.n_kv_heads = heads, kv
        hidden = a.ffn_dim // size
        ff.w1 = nn.Linear(a.dim, hidden, bias=False)
        ff.w3 = nn.Linear(a.dim, hidden, bias=False)
        ff.w2 = nn.Linear(hidden, a.dim, bias=False)
    model.output = nn.Linear(a.dim, a.vocab_size // size, bias=False)


def build(args: ModelArgs, tp: Group, dtype: torch.dtype, device: torch.device,
          seed: int = 0) -> Transformer:
    """One rank's shard with random weights in ``dtype`` on ``device`` (each rank its own
    draw: the figures do not depend on the values)."""
    if (why := problem(args, tp.size)) is not None:
        raise ValueError(why)
    with torch.device("meta"):
        model = Transformer(args)
        _shrink(model, tp.size)
    model = model.to_empty(device=device).to(dtype)
    torch.manual_seed(seed + tp.rank)
    model.init_weights()
    model.register_buffer("freqs", rope_frequencies(args.head_dim, args.max_seq_len,
                                                    args.rope_theta).to(device),
                          persistent=False)
    model.tp = tp  # type: ignore[assignment]  # read by benchmarks.inference.kvcache
    return model.eval()


def shard_of(full: Transformer, tp: Group) -> Transformer:
    """Rank ``tp.rank``'s shard of ``full``, its weights copied (same dtype and device)."""
    a, r, n = full.args, tp.rank, tp.size
    if (why := problem(a, n)) is not None:
        raise ValueError(why)
    hd = a.head_dim
    weight = full.output.weight
    with torch.device("meta"):
        model = Transformer(a)
        _shrink(model, n)
    model = model.to_empty(device=weight.device).to(weight.dtype)

    def rows(w: torch.Tensor) -> torch.Tensor:
        step = w.shape[0] // n
        return w[r * step:(r + 1) * step]

    def cols(w: torch.Tensor) -> torch.Tensor:
        step = w.shape[1] // n
        return w[:, r * step:(r + 1) * step]

    with torch.no_grad():
        model.tok_embeddings.weight.copy_(full.tok_embeddings.weight)
        model.norm.weight.copy_(full.norm.weight)
        model.output.weight.copy_(rows(full.output.weight))
        for mine, theirs in zip(model.layers.values(), full.layers.values(), strict=True):
            assert isinstance(mine, TransformerBlock) and isinstance(theirs, TransformerBlock)
            ma, ta = mine.attention, theirs.attention
            for name in ("wq", "wk", "wv"):  # whole heads: rows of head_dim each
                getattr(ma, name).weight.copy_(rows(getattr(ta, name).weight))
            ma.wo.weight.copy_(cols(ta.wo.weight))
            mf, tf = mine.feed_forward, theirs.feed_forward
            mf.w1.weight.copy_(rows(tf.w1.weight))
            mf.w3.weight.copy_(rows(tf.w3.weight))
            mf.w2.weight.copy_(cols(tf.w2.weight))
            mine.attention_norm.weight.copy_(theirs.attention_norm.weight)
            mine.ffn_norm.weight.copy_(theirs.ffn_norm.weight)
        assert ma.wq.weight.shape[0] == a.n_heads // n * hd
    model.register_buffer("freqs", full.get_buffer("freqs").clone(), persistent=False)
    model.tp = tp  # type: ignore[assignment]
    return model.eval()


def of(model: nn.Module) -> Group | None:
    """The model's tensor-parallel group, None when it is whole."""
    tp = getattr(model, "tp", None)
    return tp if isinstance(tp, Group) and tp.size > 1 else None
