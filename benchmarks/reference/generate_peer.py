"""REFERENCE, not pctk's benchmark: decode as a user gets it from transformers' ``generate``.

    python -m benchmarks.reference.generate_peer --model 1b --batch-sizes 1,32 \\
        --context 512 --decode-tokens 64 --out generate.json         # one GPU
    python -m benchmarks.reference.generate_peer --device cpu --model tiny --batch-sizes 1,2 \\
        --context 16 --decode-tokens 8                              # plumbing only

``LlamaForCausalLM`` of pctk's shape (``benchmarks.reference.plain_loop.hf_model``: untied,
SDPA), random weights, bf16 on a GPU, greedy ``generate`` with its default cache. Decode time
per step is ``(t(n tokens) - t(1 token)) / (n - 1)``: the same prompt generated to one token
and to n, so the prefill cancels. It writes a ``pctk.result/v1`` record of kind ``inference``
(``params.implementation`` says it is this reference) with the rows ``benchmarks.inference.
bench`` writes, judged against the same roofline; ``benchmarks/gpu_check.py`` prints pctk's
decode tokens/s over these. Needs ``transformers`` (the ``reference`` extra): without it,
exit 2 in one line.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fsdp.config import PRESETS
from benchmarks.inference import roofline
from benchmarks.inference.bench import _ints
from benchmarks.modelmath import shape_of
from benchmarks.record import new_record, write_record

IMPLEMENTATION = "reference: transformers LlamaForCausalLM.generate, greedy, default cache"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.reference.generate_peer")
    p.add_argument("--model", default="1b", choices=sorted(PRESETS))
    p.add_argument("--batch-sizes", type=_ints, default=[1, 32])
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--decode-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    if a.context < 1 or a.decode_tokens < 2 or a.repeats < 1:
        p.error("need --context >= 1, --decode-tokens >= 2 and --repeats >= 1")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if importlib.util.find_spec("transformers") is None:
        print("generate_peer: transformers is not installed (pip install 'pctk[reference]')",
              file=sys.stderr)
        return 2
    import torch

    from benchmarks.hardware import mem_bw_tbps_for, peak_tflops_for
    from benchmarks.reference.plain_loop import hf_model

    use_cuda = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda" if use_cuda else "cpu")
    dtype = torch.bfloat16 if use_cuda else torch.float32
    shape = PRESETS[a.model]
    torch.manual_seed(0)
    model = hf_model(shape, a.context + a.decode_tokens).to(device=device, dtype=dtype).eval()

    def generate(prompt: torch.Tensor, n: int) -> float:
        if use_cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n,
                             min_new_tokens=n, do_sample=False, pad_token_id=0)
        if use_cuda:
            torch.cuda.synchronize(device)
        assert out.shape[1] == prompt.shape[1] + n, out.shape
        return time.perf_counter() - t0

    decode = []
    with torch.inference_mode():
        for batch in a.batch_sizes:
            prompt = torch.randint(1, shape.vocab_size, (batch, a.context), device=device)
            generate(prompt, 2)  # warm-up
            one = statistics.median(generate(prompt, 1) for _ in range(a.repeats))
            full = statistics.median(generate(prompt, a.decode_tokens)
                                     for _ in range(a.repeats))
            step = max(full - one, 1e-9) / (a.decode_tokens - 1)
            decode.append({"batch": batch, "steps": a.decode_tokens - 1,
                           "mean_context": a.context + a.decode_tokens / 2, "tpot_s": step,
                           "tokens_per_s_per_seq": 1 / step, "tokens_per_s": batch / step})
            print(f"generate_peer: batch {batch}: {batch / step:,.0f} decode tokens/s",
                  flush=True)
    name = torch.cuda.get_device_name(device) if use_cuda else "cpu"
    metrics: dict[str, Any] = {"decode": decode, "prefill": []}
    metrics["roofline"] = roofline.judge(
        shape, metrics, device=device.type, dtype=str(dtype).removeprefix("torch."),
        mem_bw_tbps=mem_bw_tbps_for(name), peak_tflops=peak_tflops_for(name))
    rec = new_record("inference", params={
        "mode": "offline", "implementation": IMPLEMENTATION, "model": a.model,
        "n_params_non_embedding": shape_of(shape).params_non_embedding, "device": device.type,
        "device_name": name, "dtype": str(dtype).removeprefix("torch."),
        "batch_sizes": a.batch_sizes, "context": a.context, "decode_tokens": a.decode_tokens},
        metrics=metrics, status="PASS", reasons=[IMPLEMENTATION])
    if a.out:
        write_record(a.out, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
