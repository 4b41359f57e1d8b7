"""Offline inference benchmark on one node: a Llama-shaped decoder with random weights and a
KV cache (benchmarks/inference/kvcache.py), bf16 on a GPU, fp32 on a CPU.

It measures prefill throughput and time to first token at each prompt length, decode
tokens/s per sequence and in aggregate with the time per output token at each batch size,
the KV-cache bytes, and (``--samples``) test-time compute: n sampled continuations of one
prompt with long outputs. With a GPU's memory bandwidth and peak it judges each figure
against the roofline (benchmarks/inference/roofline.py).

Two subcommands: ``run`` measures this node and writes ``<parts>/part-<node>.json``;
``merge`` folds the parts of every node into one result record (benchmarks/record.py).
``--tensor-parallel N`` runs N processes per node (one per GPU) that share one model
(benchmarks/inference/tensor_parallel.py); the node's first process writes its part.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import faultpoints, modelmath
from benchmarks.fsdp.config import PRESETS
from benchmarks.inference import roofline
from benchmarks.record import atomic_write_text, new_record, write_record


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers, e.g. 1,8,32")
    return values


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.inference.bench")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="measure this node")
    run.add_argument("--model", default="tiny", choices=sorted(PRESETS))
    run.add_argument("--prompt-lens", type=_ints, default=[32, 128],
                     help="prefill prompt lengths (comma-separated)")
    run.add_argument("--batch-sizes", type=_ints, default=[1, 4],
                     help="decode batch sizes (comma-separated)")
    run.add_argument("--context", type=_positive, default=64,
                     help="prompt tokens cached before the decode steps")
    run.add_argument("--decode-tokens", type=_positive, default=32,
                     help="decode steps measured per batch size")
    run.add_argument("--warmup", type=int, default=2, help="untimed repeats/steps first")
    run.add_argument("--repeats", type=_positive, default=3, help="timed prefills per length")
    run.add_argument("--samples", type=int, default=0,
                     help="test-time compute: sampled continuations of one prompt (0: skip)")
    run.add_argument("--output-len", type=_positive, default=256,
                     help="tokens per sample in the test-time compute run")
    run.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    run.add_argument("--tensor-parallel", type=_positive, default=1,
                     help="processes per node sharing one model (one per GPU; srun starts "
                     "them)")
    run.add_argument("--cuda-graph", action="store_true",
                     help="decode steps replayed from one CUDA graph per batch size (GPU only)")
    run.add_argument("--mem-bw-tbps", type=float, default=None,
                     help="GPU memory bandwidth, TB/s (the driver passes the catalog's)")
    run.add_argument("--peak-tflops", type=float, default=None,
                     help="GPU dense bf16 peak, TFLOP/s (the driver passes the catalog's)")
    run.add_argument("--parts", type=Path, required=True, help="folder for this node's part")
    run.add_argument("--seed", type=int, default=0)
    merge = sub.add_parser("merge", help="one record from every node's part")
    merge.add_argument("--parts", type=Path, required=True)
    merge.add_argument("--out", type=Path, required=True)
    merge.add_argument("--price-usd-per-hour", type=float, default=None,
                       help="on-demand price of one node (cost per million output tokens)")
    merge.add_argument("--gpus-per-node", type=int, default=0,
                       help="GPUs of the instance type (each serves a replica at the rate "
                       "measured on one)")
    return p


def refuse(message: str) -> None:
    """Unusable input or environment: one line, exit 2."""
    print(f"benchmarks.inference.bench: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def progress(message: str) -> None:
    print(f"pctk-inference: {socket.gethostname()}: {message}", flush=True)


def tp_group(size: int, use_cuda: bool) -> Any:
    """This process's tensor-parallel group: the processes of its node (srun's tasks), one
    process group across the job and one subgroup per node; None for ``size`` 1."""
    if size == 1:
        return None
    import torch.distributed as dist

    from benchmarks import distenv
    from benchmarks.inference.tensor_parallel import Group

    env = distenv.detect()
    if env.local_world_size != size or env.world_size != size * env.num_nodes:
        refuse(f"--tensor-parallel {size} needs {size} tasks on each node; this step has "
               f"{env.local_world_size} per node, {env.world_size} in all")
    env.export()
    dist.init_process_group(backend="nccl" if use_cuda else "gloo", init_method="env://")
    groups = [dist.new_group(list(range(n * size, (n + 1) * size)))
              for n in range(env.num_nodes)]
    return Group(rank=env.local_rank, size=size, group=groups[env.node_rank])


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of this node; torch is imported here only."""
    import torch

    from benchmarks.inference import tensor_parallel
    from benchmarks.inference.kvcache import KVCache, forward

    if args.device == "cuda" and not torch.cuda.is_available():
        refuse("--device cuda: no CUDA device here")
    if args.cuda_graph and (args.device == "cpu" or not torch.cuda.is_available()):
        refuse("--cuda-graph needs a CUDA device")
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if use_cuda \
        else torch.device("cpu")
    dtype = torch.bfloat16 if use_cuda else torch.float32
    shape = PRESETS[args.model]
    longest = max(max(args.prompt_lens), args.context + args.warmup + args.decode_tokens,
                  args.context + args.output_len if args.samples else 0)
    if longest > shape.max_seq_len:
        refuse(f"{longest} tokens exceed the {args.model} shape's max_seq_len "
               f"{shape.max_seq_len}: shorten --prompt-lens, --context, "
               "--decode-tokens or --output-len")
    name = torch.cuda.get_device_name(device) if use_cuda else "cpu"
    if use_cuda:  # figures not passed: from the device name (benchmarks/accelerators.yaml)
        from benchmarks.hardware import mem_bw_tbps_for, peak_tflops_for

        args.mem_bw_tbps = args.mem_bw_tbps or mem_bw_tbps_for(name)
        args.peak_tflops = args.peak_tflops or peak_tflops_for(name)
    size = args.tensor_parallel
    if (why := tensor_parallel.problem(shape, size)) is not None:
        refuse(f"--tensor-parallel {size}: {why} of {args.model}")
    if use_cuda:
        total = torch.cuda.get_device_properties(device).total_memory
        need = modelmath.resident_weight_bytes(modelmath.shape_of(shape), 2, tp=size)
        if need > 0.9 * total:
            refuse(f"the {args.model} shape's bf16 weights ({need / 2**30:.0f} GiB per GPU at "
                   f"tensor parallel {size}) do not fit one {name} ({total / 2**30:.0f} GiB): "
                   "raise --tensor-parallel (more GPUs per node) or use a smaller --model")
    tp = tp_group(size, use_cuda)
    torch.manual_seed(args.seed)
    model = build_model(args.model, dtype, device) if tp is None else \
        tensor_parallel.build(shape, tp, dtype, device, seed=args.seed)
    gen = torch.Generator(device=device).manual_seed(args.seed)

    def sync() -> None:
        if use_cuda:
            torch.cuda.synchronize(device)

    def timed(fn: Callable[[], Any]) -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t0

    def prompt(batch: int, length: int) -> torch.Tensor:
        return torch.randint(0, shape.vocab_size, (batch, length), device=device, generator=gen)

    if hold := faultpoints.number("inference-hold-s"):
        progress(f"holding {hold:.0f}s before measuring")
        time.sleep(hold)
    out: dict[str, Any] = {"device": device.type, "dtype": str(dtype).removeprefix("torch."),
                           "device_name": name, "host": socket.gethostname(), "prefill": [],
                           "decode": [], "tensor_parallel": size}
    with torch.inference_mode():
        def first_token_of(length: int) -> Callable[[], None]:
            tokens = prompt(1, length)
            cache = KVCache.empty(model, 1, length, dtype, device)

            def first_token() -> None:
                forward(model, tokens, cache, 0)[:, -1].argmax(-1).item()
            return first_token

        runs = {length: first_token_of(length) for length in args.prompt_lens}
        # every length warmed up before any is timed: the first length measured must not
        # carry the process's one-time costs (allocator growth, kernel selection)
        for run in runs.values():
            for _ in range(args.warmup):
                run()
        for length in args.prompt_lens:
            times = [timed(runs[length]) for _ in range(args.repeats)]
            ttft = statistics.median(times)
            out["prefill"].append({"prompt_len": length, "ttft_s": ttft,
                                   "tokens_per_s": length / ttft})
            progress(f"prefill {length} tokens: TTFT {ttft * 1e3:.2f} ms, "
                     f"{length / ttft:,.0f} tokens/s")
        for batch in args.batch_sizes:
            out["decode"].append(_decode(model, forward, KVCache, batch, args, prompt, timed,
                                         dtype, device))
        if args.samples:
            out["test_time"] = _test_time(model, forward, KVCache, args, prompt, timed, dtype,
                                          device, gen)
    out["peak_memory_gib"] = (torch.cuda.max_memory_allocated(device) / 2**30 if use_cuda
                              else None)
    return out


def build_model(model_name: str, dtype: Any, device: Any) -> Any:
    """Random weights straight in ``dtype`` on ``device`` (no full-precision copy first); the
    rotary angles stay float32, as in training."""
    import torch

    from benchmarks.fsdp.model import Transformer, rope_frequencies

    shape = PRESETS[model_name]
    with torch.device("meta"):
        model = Transformer(shape)
    model = model.to_empty(device=device).to(dtype)
    model.init_weights()
    model.register_buffer("freqs", rope_frequencies(shape.head_dim, shape.max_seq_len,
                                                    shape.rope_theta).to(device),
                          persistent=False)
    return model.eval()


def _decode(model: Any, forward: Any, kv: Any, batch: int, args: argparse.Namespace,
            prompt: Callable[[int, int], Any], timed: Callable[[Callable[[], Any]], float],
            dtype: Any, device: Any) -> dict[str, Any]:
    steps = args.warmup + args.decode_tokens
    cache = kv.empty(model, batch, args.context + steps, dtype, device)
    state = {"next": forward(model, prompt(batch, args.context), cache, 0)[:, -1:].argmax(-1),
             "pos": args.context}

    if args.cuda_graph:
        from benchmarks.inference.kvcache import GraphedDecode

        graphed = GraphedDecode(model, cache, batch, args.context)

        def step() -> None:
            state["next"] = graphed(state["next"], state["pos"]).argmax(-1)
            state["pos"] += 1
    else:
        def step() -> None:
            state["next"] = forward(model, state["next"], cache, state["pos"]).argmax(-1)
            state["pos"] += 1

    for _ in range(args.warmup):
        step()
    times = [timed(step) for _ in range(args.decode_tokens)]
    total = sum(times)
    # TPOT is the mean step, so that tokens/s per sequence is 1 / TPOT: both from the same
    # samples (the median, which a few slow steps do not move, is kept beside it)
    row = {"batch": batch, "steps": len(times),
           "mean_context": args.context + args.warmup + (len(times) - 1) / 2,
           "tpot_s": total / len(times),
           "tpot_p50_s": statistics.median(times),
           "tpot_p90_s": sorted(times)[min(len(times) - 1, int(0.9 * len(times)))],
           "tokens_per_s_per_seq": len(times) / total,
           "tokens_per_s": batch * len(times) / total,
           "kv_cache_bytes": cache.nbytes * args.tensor_parallel}
    progress(f"decode batch {batch}: TPOT {row['tpot_s'] * 1e3:.2f} ms, "
             f"{row['tokens_per_s']:,.0f} tokens/s, KV cache {cache.nbytes / 2**20:.1f} MiB")
    return row


def _test_time(model: Any, forward: Any, kv: Any, args: argparse.Namespace,
               prompt: Callable[[int, int], Any], timed: Callable[[Callable[[], Any]], float],
               dtype: Any, device: Any, gen: Any) -> dict[str, Any]:
    """n sampled continuations (temperature 1) of one prompt, which is prefilled once."""
    import torch

    n, length = args.samples, args.output_len
    first = kv.empty(model, 1, args.context, dtype, device)
    state: dict[str, Any] = {}

    def run() -> None:
        logits = forward(model, prompt(1, args.context), first, 0)[:, -1]
        cache = first.expand(n, args.context, args.context + length)
        token = torch.multinomial(logits.float().softmax(-1).expand(n, -1), 1, generator=gen)
        for pos in range(args.context, args.context + length - 1):
            probs = forward(model, token, cache, pos)[:, -1].float().softmax(-1)
            token = torch.multinomial(probs, 1, generator=gen)
        state["kv"] = cache.nbytes * args.tensor_parallel

    seconds = timed(run)
    row = {"samples": n, "output_len": length, "prompt_len": args.context,
           "output_tokens": n * length, "seconds": seconds,
           "tokens_per_s": n * length / seconds, "kv_cache_bytes": state["kv"]}
    progress(f"test-time compute: {n} samples x {length} tokens in {seconds:.2f}s, "
             f"{row['tokens_per_s']:,.0f} output tokens/s")
    return row


def run(args: argparse.Namespace) -> int:
    """Measure; the node's first process writes ``part-<node>.json`` (one process per node
    without tensor parallel, so the node is its rank)."""
    tp = args.tensor_parallel > 1
    rank = int(os.environ.get("SLURM_NODEID" if tp else "SLURM_PROCID", "0"))
    writer = not tp or int(os.environ.get("SLURM_LOCALID", "0")) == 0
    progress(f"model {args.model}, node {rank}"
             + (f", tensor parallel {args.tensor_parallel}" if tp else "") + ": measuring")
    part = measure(args)
    if tp:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    if not writer:
        return 0
    part["rank"] = rank
    part["settings"] = {k: (str(v) if isinstance(v, Path) else v)
                        for k, v in vars(args).items() if k not in ("command", "parts")}
    args.parts.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.parts / f"part-{rank}.json", json.dumps(part, indent=2))
    progress("done")
    return 0


def merge(args: argparse.Namespace) -> int:
    """The record: node 0's figures at the top level, every node's under ``nodes``, the
    roofline verdict and (with ``--samples``) the cost per million output tokens."""
    paths = sorted(args.parts.glob("part-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    if not paths:
        print(f"no part-*.json in {args.parts}: no node finished measuring", file=sys.stderr)
        return 2
    parts = [json.loads(p.read_text()) for p in paths]
    first, settings = parts[0], parts[0]["settings"]
    shape = PRESETS[settings["model"]]
    size = int(settings.get("tensor_parallel", 1))
    verdict = roofline.judge(shape, first, device=first["device"], dtype=first["dtype"],
                             mem_bw_tbps=settings["mem_bw_tbps"],
                             peak_tflops=settings["peak_tflops"], gpus=size)
    metrics: dict[str, Any] = {
        "prefill": first["prefill"], "decode": first["decode"], "roofline": verdict,
        "kv_bytes_per_token": modelmath.kv_bytes_per_token(
            modelmath.shape_of(shape), roofline.DTYPE_BYTES[first["dtype"]]),
        "peak_memory_gib": first["peak_memory_gib"],
        "nodes": [{k: p[k] for k in ("host", "rank", "device_name", "prefill", "decode",
                                     *(("test_time",) if "test_time" in p else ()))}
                  for p in parts]}
    if "test_time" in first:
        metrics["test_time"] = _cost(parts, args.price_usd_per_hour, args.gpus_per_node, size)
    reasons = _reasons(metrics)
    rec = new_record("inference", params={
        "mode": "offline", "model": settings["model"],
        "n_params_non_embedding": modelmath.shape_of(shape).params_non_embedding,
        "device": first["device"], "device_name": first["device_name"],
        "dtype": first["dtype"], "nodes_measured": len(parts),
        "decode_path": "cuda-graph" if settings.get("cuda_graph") else "eager",
        "tensor_parallel": size,
        **{k: settings[k] for k in ("prompt_lens", "batch_sizes", "context", "decode_tokens",
                                    "warmup", "repeats", "samples", "output_len",
                                    "mem_bw_tbps", "peak_tflops")}},
        metrics=metrics, status="PASS", reasons=reasons)
    rec["cluster"]["hosts"] = [p["host"] for p in parts]
    write_record(args.out, rec)
    for reason in reasons:
        print(f"pctk-inference: {reason}", flush=True)
    print(f"pctk-inference: record {args.out}", flush=True)
    return 0


def _cost(parts: list[dict[str, Any]], price: float | None, gpus: int, tp: int = 1
          ) -> dict[str, Any]:
    """Output tokens/s of every node's sampled run together, and what a million cost when
    each group of ``tp`` GPUs of a node serves a replica at the measured rate (one replica on
    CPU nodes)."""
    per_node = [p["test_time"]["tokens_per_s"] for p in parts]
    replicas = max(gpus // tp, 1)
    node_rate = statistics.mean(per_node) * replicas
    return {**parts[0]["test_time"], "tokens_per_s_per_node": node_rate,
            "tokens_per_s_all_nodes": node_rate * len(parts), "replicas_per_node": replicas,
            "price_usd_per_hour": price,
            "usd_per_million_output_tokens": modelmath.usd_per_million_tokens(price, node_rate)}


def _reasons(metrics: dict[str, Any]) -> list[str]:
    verdict = metrics["roofline"]
    if not verdict["judged"]:
        return [verdict["reason"]]
    out = [f"decode batch {d['batch']}: {d['fraction']:.0%} of the {d['limit']} bound "
           f"({d['bound_tokens_per_s']:,.0f} tokens/s)" for d in verdict["decode"]]
    out += [f"prefill {p['prompt_len']}: {p['fraction']:.0%} of the compute bound"
            for p in verdict["prefill"]]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return run(args) if args.command == "run" else merge(args)


if __name__ == "__main__":
    sys.exit(main())
