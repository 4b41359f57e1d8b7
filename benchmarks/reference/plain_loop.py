"""REFERENCE, not pctk's benchmark: the training loop a user writes by hand in an afternoon.

    python -m benchmarks.reference.plain_loop --model 1b --batch-size 4 --seq-len 4096 \\
        --out plain.json                      # one GPU
    python -m benchmarks.reference.plain_loop --device cpu --model tiny --seq-len 32 \\
        --batch-size 2 --steps 3              # plumbing only

transformers' ``LlamaForCausalLM`` with pctk's shape (the presets of
``benchmarks.fsdp.config``, the embedding and the output projection untied), fp32 weights
under ``torch.autocast`` to bf16, SDPA attention, fused AdamW (foreach on a CPU) with pctk's
learning rate, betas, weight decay and gradient clipping, the forward and the loss compiled
as one function (``torch.compile`` of the whole model; on by default on GPUs). No process
group, no sharding: one device.

It is what ``benchmarks/gpu_check.py`` sets pctk's FSDP benchmark against: the same tokens
(``benchmarks.fsdp.data.SyntheticBatches``), the same tokens per step, the same FLOP formula
(:func:`benchmarks.modelmath.training_flops_per_token` of the shape, whose parameters the
model here has: tests/fsdp/test_plain_loop.py) and the same timing (from the forward to the
loss on the host, warm-up steps left out; peak memory from ``torch.cuda.max_memory_allocated``
after the warm-up). It writes a ``pctk.result/v1`` record of kind ``fsdp`` whose
``params.implementation`` says that it is this reference. Needs ``transformers`` (the
``reference`` extra); without it, exit 2 in one line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks import record
from benchmarks.fsdp.config import PRESETS, ModelArgs, OptimConfig, preset
from benchmarks.fsdp.data import SyntheticBatches
from benchmarks.fsdp.metrics import ThroughputMeter, peak_memory_gib
from benchmarks.hardware import peak_tflops_for, source_of
from benchmarks.modelmath import shape_of, training_flops_per_token

IMPLEMENTATION = ("reference: hand-written loop, transformers LlamaForCausalLM, fp32 weights "
                  "+ bf16 autocast, SDPA, fused AdamW, whole-model torch.compile")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.reference.plain_loop",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="1b", choices=list(PRESETS))
    p.add_argument("--batch-size", type=int, default=4, help="sequences per step")
    p.add_argument("--seq-len", type=int, default=4096)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--timing-warmup", type=int, default=5)
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile forward and loss (default: on GPUs only)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="dense bf16 peak (default: from the GPU name)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="result record")
    p.add_argument("--like", type=Path, default=None,
                   help="an fsdp record: take its model, sequence length and per-GPU batch "
                   "(the same shape and tokens per step as that run)")
    a = p.parse_args(argv)
    if a.like is not None:
        try:
            like = json.loads(a.like.read_text())["params"]
            a.model, a.seq_len, a.batch_size = (like["model"], int(like["seq_len"]),
                                                int(like["local_batch_size"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            p.error(f"--like {a.like}: not an fsdp record ({exc})")
    if min(a.batch_size, a.seq_len, a.steps) < 1 or not 0 <= a.timing_warmup < a.steps:
        p.error("need --batch-size, --seq-len, --steps >= 1 and 0 <= --timing-warmup < --steps")
    return a


def hf_model(args: ModelArgs, seq_len: int) -> Any:
    """``LlamaForCausalLM`` of pctk's shape, fp32, untied, SDPA attention."""
    transformers = importlib.import_module("transformers")
    config = transformers.LlamaConfig(
        hidden_size=args.dim, intermediate_size=args.ffn_dim,
        num_hidden_layers=args.n_layers, num_attention_heads=args.n_heads,
        num_key_value_heads=args.n_kv_heads, vocab_size=args.vocab_size,
        rms_norm_eps=args.norm_eps, rope_theta=args.rope_theta,
        max_position_embeddings=max(args.max_seq_len, seq_len), tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False)
    config._attn_implementation = "sdpa"
    return transformers.LlamaForCausalLM(config)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        importlib.import_module("transformers")
    except ImportError as exc:
        print(f"plain_loop: needs transformers (pip install 'pctk[reference]'): {exc}",
              file=sys.stderr)
        return 2
    cuda = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    if a.device == "cuda" and not torch.cuda.is_available():
        print("plain_loop: --device cuda but no CUDA device here", file=sys.stderr)
        return 2
    device = torch.device("cuda" if cuda else "cpu")
    compiled = a.compile if a.compile is not None else cuda
    args = preset(a.model)
    torch.manual_seed(a.seed)
    model = hf_model(args, a.seq_len).to(device)
    total = sum(p.numel() for p in model.parameters())
    n_non_embedding = total - model.get_input_embeddings().weight.numel()
    fpt = training_flops_per_token(shape_of(args), a.seq_len)
    opt = OptimConfig()
    kernels = {"fused": True} if cuda else {"foreach": True}
    optimizer = torch.optim.AdamW(model.parameters(), lr=opt.lr, betas=opt.betas,
                                  weight_decay=opt.weight_decay, **kernels)

    def forward_loss(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = model(input_ids=inputs).logits
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())

    step_fn = torch.compile(forward_loss) if compiled else forward_loss
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda)
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    peak = a.peak_tflops or (peak_tflops_for(name) if cuda else None)
    meter = ThroughputMeter(a.batch_size * a.seq_len, fpt, peak, a.timing_warmup)
    data = SyntheticBatches(args.vocab_size, a.seed, a.batch_size, a.seq_len, 0, 1)
    print(f"plain_loop: {IMPLEMENTATION}; model {a.model} ({total:,} parameters), "
          f"{a.batch_size}x{a.seq_len} tokens/step on {name}, compile {compiled}", flush=True)
    losses: list[list[float]] = []
    batch = data.local_batch(1, device)
    for step in range(1, a.steps + 1):
        inputs, targets = batch
        start = time.perf_counter()
        with autocast:
            loss = step_fn(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), opt.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        value = loss.item()  # waits for the device
        seconds = time.perf_counter() - start
        meter.record(seconds)
        if meter.seen == a.timing_warmup and cuda:
            torch.cuda.reset_peak_memory_stats(device)
        losses.append([step, value])
        if step < a.steps:
            batch = data.local_batch(step + 1, device)
        fig = meter.last(seconds)
        mfu = f" mfu {fig['mfu']:.1%}" if fig["mfu"] is not None else ""
        print(f"step {step:4d}  loss {value:.4f}  {fig['tokens_per_s_per_gpu']:,.0f} tok/s"
              f"{mfu}  {seconds * 1000:.0f} ms", flush=True)
    mem, kind = peak_memory_gib(device)
    reserved = torch.cuda.max_memory_reserved(device) / 2**30 if cuda else None
    metrics = {**meter.summary(), "flops_per_token": fpt, "peak_tflops": peak,
               "peak_tflops_source": source_of(name, "bfloat16")
               if peak and not a.peak_tflops else ("--peak-tflops" if peak else "none"),
               "mfu_dtype": "bfloat16" if cuda else "float32",
               "peak_memory_gib": mem, "peak_memory_reserved_gib": reserved,
               "peak_memory_kind": kind, "final_loss": losses[-1][1], "losses": losses}
    print(f"plain_loop: {metrics.get('tokens_per_s_per_gpu', 0):,.0f} tokens/s, "
          f"peak memory {mem:.2f} GiB", flush=True)
    if a.out is not None:
        params = {"model": a.model, "model_args": args.to_dict(), "n_params": total,
                  "n_params_non_embedding": n_non_embedding, "steps": a.steps,
                  "global_batch_size": a.batch_size, "local_batch_size": a.batch_size,
                  "seq_len": a.seq_len, "world_size": 1, "nodes": 1, "compile": compiled,
                  "activation_checkpointing": False, "device": device.type,
                  "device_name": name, "implementation": IMPLEMENTATION,
                  "param_dtype": "float32 + bfloat16 autocast" if cuda else "float32",
                  "optimizer": {"name": "AdamW", "kernels": next(iter(kernels)),
                                "lr": opt.lr, "weight_decay": opt.weight_decay},
                  "timing_warmup_steps": a.timing_warmup,
                  "transformers": importlib.import_module("transformers").__version__}
        ok = all(math.isfinite(v) for _, v in losses)
        rec = record.new_record("fsdp", params=params, metrics=metrics,
                                status="PASS" if ok else "FAIL",
                                reasons=[] if ok else ["the loss is not finite"])
        record.write_record(a.out, rec)
        print(f"record: {a.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
