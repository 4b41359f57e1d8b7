"""A KV-cache forward for benchmarks.fsdp.model.Transformer, beside it: the same modules and
weights, the training forward untouched.

:func:`forward` runs either a prefill (``pos == 0``, any length, causal) or one decode step
(one token per sequence attending to everything cached). Its logits equal the full forward's
at the same positions (tests/inference/test_kvcache.py). A model sharded by
benchmarks/inference/tensor_parallel.py runs the same code on its shard: the partial sums of
``wo`` and ``w2`` are all-reduced and the vocabulary-parallel logits all-gathered.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from benchmarks.fsdp.model import Attention, Transformer, TransformerBlock, apply_rope
from benchmarks.inference import tensor_parallel


@dataclass
class KVCache:
    """Preallocated K and V per layer, (batch, kv_heads, max_len, head_dim) each (this rank's
    KV heads under tensor parallel); zeros, as masked positions are still multiplied by zero
    weights (NaN garbage would spread)."""

    k: list[torch.Tensor]
    v: list[torch.Tensor]

    @classmethod
    def empty(cls, model: Transformer, batch: int, max_len: int, dtype: torch.dtype,
              device: torch.device) -> KVCache:
        a = model.args
        first = next(iter(model.layers.values()))
        assert isinstance(first, TransformerBlock)
        shape = (batch, first.attention.n_kv_heads, max_len, a.head_dim)
        return cls([torch.zeros(shape, dtype=dtype, device=device) for _ in range(a.n_layers)],
                   [torch.zeros(shape, dtype=dtype, device=device) for _ in range(a.n_layers)])

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))

    def expand(self, batch: int, length: int, max_len: int) -> KVCache:
        """A cache for ``batch`` sequences of up to ``max_len`` tokens that all start from
        sequence 0's first ``length`` tokens (n samples of one prompt share its prefill)."""
        def grow(t: torch.Tensor) -> torch.Tensor:
            out = torch.zeros((batch, t.shape[1], max_len, t.shape[3]), dtype=t.dtype,
                              device=t.device)
            out[:, :, :length] = t[:1, :, :length]
            return out
        return KVCache([grow(t) for t in self.k], [grow(t) for t in self.v])


def _attention(attn: Attention, x: torch.Tensor, freqs: torch.Tensor, k_cache: torch.Tensor,
               v_cache: torch.Tensor, pos: int) -> torch.Tensor:
    bsz, seq, _ = x.shape
    q = attn.wq(x).view(bsz, seq, attn.n_heads, attn.head_dim)
    k = attn.wk(x).view(bsz, seq, attn.n_kv_heads, attn.head_dim)
    v = attn.wv(x).view(bsz, seq, attn.n_kv_heads, attn.head_dim)
    q, k = apply_rope(q, freqs[pos:]), apply_rope(k, freqs[pos:])
    k_cache[:, :, pos:pos + seq] = k.transpose(1, 2)
    v_cache[:, :, pos:pos + seq] = v.transpose(1, 2)
    keys, values = k_cache[:, :, :pos + seq], v_cache[:, :, :pos + seq]
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), keys, values, is_causal=pos == 0 and seq > 1,
        enable_gqa=attn.n_kv_heads != attn.n_heads)
    return attn.wo(out.transpose(1, 2).reshape(bsz, seq, -1))


def forward(model: Transformer, tokens: torch.Tensor, cache: KVCache, pos: int) -> torch.Tensor:
    """Logits of ``tokens`` (batch, seq) placed at positions ``pos..pos+seq-1``; fills the
    cache there. A prefill starts at 0; after it, one token per call."""
    seq = tokens.shape[1]
    if pos != 0 and seq != 1:
        raise ValueError("after the prefill, decode one token per sequence at a time")
    if pos + seq > cache.k[0].shape[2]:
        raise ValueError(f"position {pos + seq} is past the cache ({cache.k[0].shape[2]})")
    tp = tensor_parallel.of(model)
    h = model.tok_embeddings(tokens)
    freqs = model.get_buffer("freqs")
    for i, block in enumerate(model.layers.values()):
        assert isinstance(block, TransformerBlock)
        h = h + _reduced(tp, _attention(block.attention, block.attention_norm(h), freqs,
                                        cache.k[i], cache.v[i], pos))
        h = h + _reduced(tp, block.feed_forward(block.ffn_norm(h)))
    return _logits(tp, model, h)


def _reduced(tp: tensor_parallel.Group | None, partial: torch.Tensor) -> torch.Tensor:
    return partial if tp is None else tp.all_reduce(partial)


def _logits(tp: tensor_parallel.Group | None, model: Transformer, h: torch.Tensor
            ) -> torch.Tensor:
    logits = model.output(model.norm(h))
    return logits if tp is None else tp.all_gather_last(logits)


def decode_static(model: Transformer, token: torch.Tensor, cache: KVCache,
                  pos: torch.Tensor) -> torch.Tensor:
    """One decode step with every shape fixed, the position a 0-d tensor: the cache is written
    with ``index_copy_`` and attention runs over the whole cache with a mask of the filled
    positions. Same logits as :func:`forward` at ``pos``; capturable in a CUDA graph."""
    tp = tensor_parallel.of(model)
    where = pos.view(1)
    freqs = model.get_buffer("freqs").index_select(0, where)
    filled = (torch.arange(cache.k[0].shape[2], device=token.device) <= pos).view(1, -1)
    h = model.tok_embeddings(token)
    for i, block in enumerate(model.layers.values()):
        assert isinstance(block, TransformerBlock)
        attn, x = block.attention, block.attention_norm(h)
        bsz = x.shape[0]
        q = attn.wq(x).view(bsz, 1, attn.n_heads, attn.head_dim)
        k = attn.wk(x).view(bsz, 1, attn.n_kv_heads, attn.head_dim)
        v = attn.wv(x).view(bsz, 1, attn.n_kv_heads, attn.head_dim)
        q, k = apply_rope(q, freqs), apply_rope(k, freqs)
        cache.k[i].index_copy_(2, where, k.transpose(1, 2))
        cache.v[i].index_copy_(2, where, v.transpose(1, 2))
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), cache.k[i], cache.v[i], attn_mask=filled,
            enable_gqa=attn.n_kv_heads != attn.n_heads)
        h = h + _reduced(tp, attn.wo(out.transpose(1, 2).reshape(bsz, 1, -1)))
        h = h + _reduced(tp, block.feed_forward(block.ffn_norm(h)))
    return _logits(tp, model, h)


class GraphedDecode:
    """:func:`decode_static` captured once in a CUDA graph and replayed per token: one launch
    per step instead of one per kernel (decode at small batch is bound by launches)."""

    def __init__(self, model: Transformer, cache: KVCache, batch: int, pos: int):
        device = cache.k[0].device
        self.token = torch.zeros((batch, 1), dtype=torch.long, device=device)
        self.pos = torch.tensor(pos, device=device)
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):  # warm-up off the capture, as torch's docs ask
            for _ in range(2):
                decode_static(model, self.token, cache, self.pos)
        torch.cuda.current_stream(device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = decode_static(model, self.token, cache, self.pos)

    def __call__(self, token: torch.Tensor, pos: int) -> torch.Tensor:
        self.token.copy_(token)
        self.pos.fill_(pos)
        self.graph.replay()
        return self.logits
