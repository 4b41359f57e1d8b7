"""Incremental decoding with a KV cache for the benchmark's Transformer (the RL workload's
generation phase).

It runs on a plain, unsharded :class:`benchmarks.fsdp.model.Transformer` (the rollout copy
that the RL loop fills from the FSDP shards each iteration), reading the blocks' weights
directly: one prefill pass over the prompts fills each layer's keys and values, then every
new token costs one pass of a single position that attends to the cache. Same maths as
``Transformer.forward`` (tests/fsdp/test_rl.py checks the logits agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F

from benchmarks.fsdp.model import Attention, Transformer, TransformerBlock, apply_rope


@dataclass
class KVCache:
    """Keys and values of every layer, (batch, kv_heads, max_len, head_dim); ``length``
    positions filled."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    length: int = 0

    @classmethod
    def empty(cls, model: Transformer, batch: int, max_len: int, dtype: torch.dtype,
              device: torch.device) -> KVCache:
        a = model.args
        shape = (batch, a.n_kv_heads, max_len, a.head_dim)
        return cls([torch.zeros(shape, dtype=dtype, device=device) for _ in range(a.n_layers)],
                   [torch.zeros(shape, dtype=dtype, device=device) for _ in range(a.n_layers)])


@torch.no_grad()
def forward_cached(model: Transformer, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits of ``tokens`` (batch, seq) placed after the ``cache.length`` cached positions;
    their keys and values are appended to the cache."""
    start, seq = cache.length, tokens.shape[1]
    end = start + seq
    freqs = model.get_buffer("freqs")[start:end]
    h = model.tok_embeddings(tokens)
    for i, module in enumerate(model.layers.values()):
        block = cast(TransformerBlock, module)
        attn = cast(Attention, block.attention)
        x = block.attention_norm(h)
        bsz = x.shape[0]
        q = attn.wq(x).view(bsz, seq, attn.n_heads, attn.head_dim)
        k = attn.wk(x).view(bsz, seq, attn.n_kv_heads, attn.head_dim)
        v = attn.wv(x).view(bsz, seq, attn.n_kv_heads, attn.head_dim)
        q, k = apply_rope(q, freqs), apply_rope(k, freqs)
        cache.keys[i][:, :, start:end] = k.transpose(1, 2)
        cache.values[i][:, :, start:end] = v.transpose(1, 2)
        keys, values = cache.keys[i][:, :, :end], cache.values[i][:, :, :end]
        # query j (position start + j) sees keys 0..start + j
        mask = None
        if seq > 1:
            mask = torch.ones(seq, end, dtype=torch.bool, device=x.device).tril(start)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), keys, values, attn_mask=mask,
            enable_gqa=attn.n_kv_heads != attn.n_heads)
        h = h + attn.wo(out.transpose(1, 2).reshape(bsz, seq, -1))
        h = h + block.feed_forward(block.ffn_norm(h))
    cache.length = end
    return model.output(model.norm(h))


@torch.no_grad()
def generate(model: Transformer, prompts: torch.Tensor, new_tokens: int,
             generator: torch.Generator, temperature: float = 1.0) -> torch.Tensor:
    """``new_tokens`` sampled tokens after each prompt row (batch, prompt_len), as
    (batch, new_tokens): one prefill, then one cached step per token."""
    batch, plen = prompts.shape
    dtype = next(model.parameters()).dtype
    cache = KVCache.empty(model, batch, plen + new_tokens, dtype, prompts.device)
    logits = forward_cached(model, prompts, cache)[:, -1]
    out = torch.empty(batch, new_tokens, dtype=torch.long, device=prompts.device)
    for t in range(new_tokens):
        probs = torch.softmax(logits.float() / temperature, dim=-1)
        nxt = torch.multinomial(probs, 1, generator=generator)
        out[:, t] = nxt[:, 0]
        if t + 1 < new_tokens:
            logits = forward_cached(model, nxt, cache)[:, -1]
    return out
