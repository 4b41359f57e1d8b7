"""The roofline of LLM inference for the Llama shapes of benchmarks/fsdp: torch-free, so the
node, the driver, the report and the tests share one arithmetic (its FLOPs and bytes are
:mod:`benchmarks.modelmath`'s).

Decode (one new token per sequence per step) at batch ``b`` must read every weight once per
step and every sequence's KV cache once; it is bounded by memory bandwidth while
``b x 2N`` FLOPs stay under the peak::

    bytes/step  = W + b x C x KV          W  = 2-byte params without the input embedding
                                          KV = 2 x layers x kv_heads x head_dim x 2 bytes/token
    tokens/s   <= b / max(bytes/step / BW, b x F(C) / peak)
    F(C)        = 2N + 4 x layers x heads x head_dim x C      (FLOPs per token, C tokens seen)

The input embedding is a lookup of ``b`` rows, not a read of the table, so it is left out
(as the training FLOPs, :func:`benchmarks.modelmath.training_flops_per_token`, leave it out
of N). Prefill is dense matmuls under a causal mask: the prompt's i-th token attends to i
tokens, so the prompt costs ``sum F(i), i = 1..L = 2N x L + 4 x layers x heads x head_dim x
L(L+1)/2`` and ``tokens/s <= peak x L / that``. A kernel that skips the masked half (FlashAttention,
``scaled_dot_product_attention(is_causal=True)``) does that work and no more; counting the
whole L x L square (as the training MFU convention does, for comparability) would lower the
bound and inflate the fraction of it a run reaches (about 35% at 32k tokens on 8B).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.fsdp.config import ModelArgs
from benchmarks.modelmath import (
    decode_weight_bytes,
    forward_flops_per_token,
    kv_bytes_per_token,
    prefill_flops,
    shape_of,
)

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def tensor_parallel_problem(args: ModelArgs, size: int) -> str | None:
    """Why ``size`` GPUs cannot share this shape by heads, hidden units and vocabulary
    (benchmarks/inference/tensor_parallel.py), or None."""
    if size < 1:
        return f"tensor parallel size {size} is not a positive number"
    for what, count in (("query heads", args.n_heads), ("KV heads", args.n_kv_heads),
                        ("hidden units", args.ffn_dim), ("vocabulary entries", args.vocab_size)):
        if count % size:
            return f"{size} ranks do not divide the shape's {count} {what}"
    return None


@dataclass(frozen=True)
class Bound:
    """The best a device can do: tokens/s (all sequences together) and what limits it."""

    tokens_per_s: float
    limit: str  # "memory" | "compute"
    bytes_per_step: int
    flops_per_step: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decode_bound(args: ModelArgs, batch: int, context: int, *, mem_bw_tbps: float,
                 peak_tflops: float, dtype_bytes: int = 2) -> Bound:
    """Aggregate decode tokens/s at ``batch`` sequences with ``context`` cached tokens each."""
    shape = shape_of(args)
    nbytes = decode_weight_bytes(shape, dtype_bytes) + batch * context * kv_bytes_per_token(
        shape, dtype_bytes)
    flops = batch * forward_flops_per_token(shape, context)
    memory_s, compute_s = nbytes / (mem_bw_tbps * 1e12), flops / (peak_tflops * 1e12)
    step = max(memory_s, compute_s)
    return Bound(batch / step, "memory" if memory_s >= compute_s else "compute", nbytes, flops)


def prefill_bound(args: ModelArgs, prompt_len: int, *, peak_tflops: float) -> Bound:
    """Prefill tokens/s of one prompt of ``prompt_len`` tokens (module docstring)."""
    flops = prefill_flops(shape_of(args), prompt_len)
    return Bound(peak_tflops * 1e12 * prompt_len / flops, "compute", 0, flops)


def judge(args: ModelArgs, metrics: dict[str, Any], *, device: str, dtype: str,
          mem_bw_tbps: float | None, peak_tflops: float | None, gpus: int = 1
          ) -> dict[str, Any]:
    """The fraction of the bound each measured point reached, or why none is judged.

    ``metrics`` holds ``decode`` (rows with batch, mean_context, tokens_per_s) and ``prefill``
    (rows with prompt_len, tokens_per_s) as benchmarks.inference.bench writes them.
    ``gpus`` share one model (tensor parallel): each reads its share of the weights and the
    KV cache, so the bound is that of ``gpus`` times the bandwidth and the peak (the
    all-reduces between them are not in it: they are part of what the fraction shows).
    """
    if device != "cuda":
        return {"judged": False, "reason": f"ran on {device}: no roofline is judged (the "
                "bounds are a GPU's memory bandwidth and tensor-core peak)"}
    if not mem_bw_tbps or not peak_tflops:
        return {"judged": False, "reason": "no memory bandwidth or peak for this GPU: pass "
                "--instance-type (catalog) or --mem-bw-tbps and --peak-tflops"}
    size = DTYPE_BYTES.get(dtype, 2)
    mem_bw_tbps, peak_tflops = mem_bw_tbps * gpus, peak_tflops * gpus
    decode = []
    for row in metrics.get("decode", []):
        bound = decode_bound(args, row["batch"], round(row["mean_context"]),
                             mem_bw_tbps=mem_bw_tbps, peak_tflops=peak_tflops,
                             dtype_bytes=size)
        decode.append({"batch": row["batch"], "bound_tokens_per_s": bound.tokens_per_s,
                       "limit": bound.limit, "bytes_per_step": bound.bytes_per_step,
                       "fraction": row["tokens_per_s"] / bound.tokens_per_s})
    prefill = []
    for row in metrics.get("prefill", []):
        bound = prefill_bound(args, row["prompt_len"], peak_tflops=peak_tflops)
        prefill.append({"prompt_len": row["prompt_len"],
                        "bound_tokens_per_s": bound.tokens_per_s,
                        "fraction": row["tokens_per_s"] / bound.tokens_per_s})
    return {"judged": True, "mem_bw_tbps": mem_bw_tbps, "peak_tflops": peak_tflops,
            "gpus": gpus, "decode": decode, "prefill": prefill}
