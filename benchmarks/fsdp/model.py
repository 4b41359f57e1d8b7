"""Llama-style decoder in plain PyTorch: RMSNorm, rotary embeddings, SwiGLU, grouped-query
attention through ``F.scaled_dot_product_attention(is_causal=True)``.

Shapes follow the published Llama 3 configs. Two simplifications that do not change the
FLOPs or the memory traffic that matter here: the input and output embeddings are never tied
(Llama 3.2 1B ties them), and Llama 3.1's long-context rope scaling is left out.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.fsdp.config import PRESETS, ModelArgs, preset

__all__ = ["PRESETS", "ModelArgs", "Transformer", "count_params", "preset"]


def rope_frequencies(head_dim: int, max_seq_len: int, theta: float) -> torch.Tensor:
    """cos and sin of the rotation angles, shape (max_seq_len, head_dim // 2, 2)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv)
    return torch.stack((angles.cos(), angles.sin()), dim=-1)


def apply_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of channels of x (batch, seq, heads, head_dim) by position: positions
    0.. from ``freqs`` (max_seq_len, head_dim // 2, 2), or each row's own positions when
    ``freqs`` was gathered per row, (batch, seq, head_dim // 2, 2) (packed documents)."""
    seq = x.shape[1]
    pairs = x.float().unflatten(-1, (-1, 2))
    if freqs.dim() == 4:
        cos, sin = freqs[:, :seq, None, :, 0], freqs[:, :seq, None, :, 1]
    else:
        cos, sin = freqs[:seq, None, :, 0], freqs[:seq, None, :, 1]
    real = pairs[..., 0] * cos - pairs[..., 1] * sin
    imag = pairs[..., 0] * sin + pairs[..., 1] * cos
    return torch.stack((real, imag), dim=-1).flatten(-2).type_as(x)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads = args.n_heads
        self.n_kv_heads = args.n_kv_heads
        self.head_dim = args.head_dim
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, freqs: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        bsz, seq, _ = x.shape
        q = self.wq(x).view(bsz, seq, self.n_heads, self.head_dim)
        k = self.wk(x).view(bsz, seq, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(bsz, seq, self.n_kv_heads, self.head_dim)
        q, k = apply_rope(q, freqs), apply_rope(k, freqs)
        # (batch, heads, seq, head_dim); enable_gqa lets SDPA share each kv head
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None,
            enable_gqa=self.n_kv_heads != self.n_heads
        )
        return self.wo(out.transpose(1, 2).reshape(bsz, seq, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs, layer_id: int):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, args.ffn_dim)
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)
        # deeper layers start smaller (torchtitan's depth-scaled init)
        self.init_std = 0.02 / math.sqrt(2 * (layer_id + 1))

    def forward(self, x: torch.Tensor, freqs: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), freqs, mask)
        return h + self.feed_forward(self.ffn_norm(h))

    def init_weights(self) -> None:
        for norm in (self.attention_norm, self.ffn_norm):
            norm.reset_parameters()
        for lin in (self.attention.wq, self.attention.wk, self.attention.wv,
                    self.feed_forward.w1):
            nn.init.trunc_normal_(lin.weight, std=0.02)
        for lin in (self.attention.wo, self.feed_forward.w2, self.feed_forward.w3):
            nn.init.trunc_normal_(lin.weight, std=self.init_std)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        # a ModuleDict keeps parameter names stable when blocks are wrapped or compiled
        self.layers = nn.ModuleDict(
            {str(i): TransformerBlock(args, i) for i in range(args.n_layers)}
        )
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        self.register_buffer(
            "freqs", rope_frequencies(args.head_dim, args.max_seq_len, args.rope_theta),
            persistent=False,
        )
        self.init_weights()

    def init_weights(self) -> None:
        """(Re)initialise every parameter and buffer: also used after meta-device build."""
        freqs = rope_frequencies(self.args.head_dim, self.args.max_seq_len, self.args.rope_theta)
        with torch.no_grad():
            self.get_buffer("freqs").copy_(freqs)
        nn.init.normal_(self.tok_embeddings.weight)
        for block in self.layers.values():
            block.init_weights()  # type: ignore[operator]
        self.norm.reset_parameters()
        cutoff = 3 / math.sqrt(self.args.dim)
        nn.init.trunc_normal_(self.output.weight, std=self.args.dim**-0.5, a=-cutoff, b=cutoff)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of ``tokens`` (batch, seq). Packed rows pass each token's position within
        its document and a boolean attention mask (batch, 1, seq, seq), True where a query
        may attend (benchmarks.fsdp.sft); without them, one causal sequence per row."""
        h = self.tok_embeddings(tokens)
        freqs = self.freqs if positions is None else self.get_buffer("freqs")[positions]
        for block in self.layers.values():
            h = block(h, freqs) if mask is None else block(h, freqs, mask)
        return self.output(self.norm(h))


def count_params(model: nn.Module) -> tuple[int, int]:
    """(all parameters, parameters without the input embedding).

    Works on the unsharded module and on a meta-device one. The output projection stays in
    the second count: unlike the embedding lookup it is a matmul (torchtitan's accounting).
    """
    total = sum(p.numel() for p in model.parameters())
    emb = sum(p.numel() for name, p in model.named_parameters() if "tok_embeddings" in name)
    return total, total - emb
