"""Sampling for the RL workload's generation phase, on the KV cache of the inference
benchmark (:mod:`benchmarks.inference.kvcache`: one prefill over the prompts, then one cached
pass per new token; its logits equal the full forward's, tests/inference/test_kvcache.py).

It runs on a plain, unsharded :class:`benchmarks.fsdp.model.Transformer`: the rollout copy
that the RL loop fills from the FSDP shards each iteration.
"""

from __future__ import annotations

import torch

from benchmarks.fsdp.model import Transformer
from benchmarks.inference import kvcache


@torch.no_grad()
def generate(model: Transformer, prompts: torch.Tensor, new_tokens: int,
             generator: torch.Generator, temperature: float = 1.0) -> torch.Tensor:
    """``new_tokens`` sampled tokens after each prompt row (batch, prompt_len), as
    (batch, new_tokens): one prefill, then one cached step per token."""
    batch, plen = prompts.shape
    dtype = next(model.parameters()).dtype
    cache = kvcache.KVCache.empty(model, batch, plen + new_tokens, dtype, prompts.device)
    logits = kvcache.forward(model, prompts, cache, 0)[:, -1]
    out = torch.empty(batch, new_tokens, dtype=torch.long, device=prompts.device)
    for t in range(new_tokens):
        probs = torch.softmax(logits.float() / temperature, dim=-1)
        nxt = torch.multinomial(probs, 1, generator=generator)
        out[:, t] = nxt[:, 0]
        if t + 1 < new_tokens:
            logits = kvcache.forward(model, nxt, cache, plen + t)[:, -1]
    return out
