"""FSDP2 training benchmark: one short loop, one result record.

    python -m benchmarks.fsdp.train --model tiny --steps 20 --batch-size 8 --seq-len 64 \
        --ckpt-dir DIR --ckpt-every 5 --out record.json

Run one process per GPU (srun or torchrun); rank and world come from benchmarks.distenv. On a
machine without CUDA it trains on the CPU with gloo in fp32. Settings left out get the small
CPU demo values on a CPU and, on a GPU, values chosen from the model shape and the GPU's
memory (benchmarks/fsdp/defaults.py), stated in the log and in the record's params.defaults.
With ``--ckpt-dir`` it resumes from the newest complete checkpoint there, so a requeued job
continues its loss curve.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, replace
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from benchmarks import distenv, faultpoints, record
from benchmarks.fsdp import breakdown, checkpoint, defaults, sft, stragglers
from benchmarks.fsdp.config import RL_REWARDED_SHARE, TrainConfig, parse_config
from benchmarks.fsdp.data import DataError, FileBatches, SyntheticBatches, TokenBatches
from benchmarks.fsdp.meshcomm import mesh_barrier, mesh_broadcast, mesh_max, mesh_mean, mesh_sum
from benchmarks.fsdp.metrics import PeakMemory, ThroughputMeter, peak_memory_gib
from benchmarks.fsdp.model import Transformer, count_params, preset
from benchmarks.fsdp.optim import build_optimizer
from benchmarks.fsdp.parallelize import build_mesh, compute_dtype, materialise, parallelize
from benchmarks.hardware import peak_tflops_for, source_of
from benchmarks.modelmath import shape_of, training_flops_per_token

# a fault point (benchmarks.faultpoints) for tests: the default process group's gloo bound
# only to this device type (cuda), the training mesh's to the cpu; a collective that is not
# over the mesh then fails as on GPUs: "No backend type associated with device type cpu"
WORLD_ONLY_ON = "fsdp-world-backend-only-on"
META_INIT_ABOVE = 2_000_000_000  # parameters; bigger models are built on the meta device


def log(message: str) -> None:
    if dist.get_rank() == 0:
        print(message, flush=True)


def pick_device(kind: str, local_rank: int) -> torch.device:
    if kind == "cuda" or (kind == "auto" and torch.cuda.is_available()):
        device = torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def sizes(cfg: TrainConfig) -> tuple[int, int]:
    """(global batch, sequence length) of a config whose defaults were resolved."""
    if cfg.batch_size is None or cfg.seq_len is None:
        raise ValueError("batch size and sequence length are unresolved: call resolve_defaults")
    return cfg.batch_size, cfg.seq_len


def resolve_defaults(cfg: TrainConfig, world_size: int, shard: int, device: torch.device
                     ) -> tuple[TrainConfig, defaults.Choice | None]:
    """``cfg`` with every setting the command line left out filled in: the small CPU demo
    settings on a CPU; on a GPU the choice of :func:`benchmarks.fsdp.defaults.gpu_defaults`
    from the model shape and this GPU's memory (None on a CPU)."""
    if device.type != "cuda":
        cpu_seq = sft.CPU_SEQ_LEN if cfg.workload == "sft" else defaults.CPU_SEQ_LEN
        return replace(cfg, seq_len=cfg.seq_len or cpu_seq,
                       batch_size=cfg.batch_size or defaults.cpu_batch_size(world_size),
                       compile=bool(cfg.compile), ac=bool(cfg.ac)), None
    props = torch.cuda.get_device_properties(device)
    label = f"{props.name} {props.total_memory / 2**30:.0f} GiB"
    per_gpu = None if cfg.batch_size is None else max(1, cfg.batch_size // world_size)
    choice = defaults.gpu_defaults(preset(cfg.model), props.total_memory, shard, label,
                                   seq_len=cfg.seq_len, batch_per_gpu=per_gpu,
                                   compile=cfg.compile, ac=cfg.ac)
    return replace(cfg, seq_len=choice.seq_len,
                   batch_size=cfg.batch_size or choice.batch_per_gpu * world_size,
                   compile=choice.compile, ac=choice.ac), choice


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token loss, computed in fp32 from (bf16) logits."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def loss_function(compiled: bool) -> Any:
    """:func:`cross_entropy`, compiled with ``--compile``: the fp32 upcast, log-softmax and
    NLL over the vocabulary fuse into one pass, so the fp32 copy of the logits (4 bytes per
    token per vocabulary entry: 4 GiB at 8k tokens x 128k) is never stored (torchtitan
    compiles its loss the same way)."""
    return torch.compile(cross_entropy) if compiled else cross_entropy


def build_model(cfg: TrainConfig, device: torch.device) -> tuple[Transformer, bool]:
    args = preset(cfg.model)
    args = replace(args, max_seq_len=max(args.max_seq_len, sizes(cfg)[1]))
    with torch.device("meta"):
        model = Transformer(args)
    meta = cfg.meta_init if cfg.meta_init is not None else (
        count_params(model)[0] > META_INIT_ABOVE)
    if not meta:
        # the same seed on every rank: all start from identical full weights, then shard
        torch.manual_seed(cfg.seed)
        with device:
            model = Transformer(args)
    return model, meta


def build_data(cfg: TrainConfig, vocab: int, env: distenv.DistEnv) -> TokenBatches:
    batch_size, seq_len = sizes(cfg)
    if cfg.workload == "sft":
        return sft.PackedBatches(cfg.data or sft.DEFAULT_DATA, batch_size, seq_len, env.rank,
                                 env.world_size, cfg.pack)
    if cfg.data_file is not None:
        return FileBatches(cfg.data_file, batch_size, seq_len, env.rank,
                           env.world_size, cfg.data_dtype)
    return SyntheticBatches(vocab, cfg.seed, batch_size, seq_len, env.rank, env.world_size)


def process_group_backends(device: torch.device) -> tuple[str, str | None]:
    """(default group backend, mesh backend override or None to reuse the default group)."""
    only_on = faultpoints.text(WORLD_ONLY_ON)
    if device.type == "cpu" and only_on:
        return f"{only_on}:gloo", "cpu:gloo"
    return ("nccl" if device.type == "cuda" else "gloo"), None


def peak_for(cfg: TrainConfig, device: torch.device, dtype: str) -> tuple[float | None, str]:
    """The peak TFLOP/s MFU divides by, and where it came from."""
    if cfg.peak_tflops is not None:
        return cfg.peak_tflops, "--peak-tflops"
    if device.type != "cuda":
        return None, "none: not a GPU"
    name = torch.cuda.get_device_name(device)
    peak = peak_tflops_for(name, dtype)
    if peak is None:
        return None, f"none: no {dtype} peak for {name!r}; pass --peak-tflops"
    if dtype == "float8":  # all FLOPs over the fp8 peak, though not every matmul is fp8
        return peak, (f"{source_of(name, dtype)}, dense; "
                      "the output projection and attention run in bf16")
    return peak, source_of(name, dtype)


def train(cfg: TrainConfig, env: distenv.DistEnv, device: torch.device,
          mesh_backend: str | None = None, choice: defaults.Choice | None = None
          ) -> dict[str, Any]:
    memory = PeakMemory(device)
    batch_size, seq_len = sizes(cfg)
    model, meta = build_model(cfg, device)
    n_params, n_non_embedding = count_params(model)
    mesh = build_mesh(device.type, env.world_size, env.local_world_size, cfg.parallel.hsdp,
                      mesh_backend)
    model = parallelize(model, mesh, cfg.parallel)
    if meta:
        torch.manual_seed(cfg.seed + env.rank)
        materialise(model, device)
    optimizer, scheduler = build_optimizer(model, cfg.optim, cfg.steps)
    data = build_data(cfg, model.args.vocab_size, env)

    dtype = compute_dtype(device.type, cfg.parallel.bf16, cfg.parallel.fp8)
    peak, peak_source = peak_for(cfg, device, dtype)
    local_tokens = batch_size // env.world_size * seq_len
    fpt = training_flops_per_token(shape_of(model.args), seq_len)
    loss_fn = loss_function(cfg.parallel.compile)
    sft_loss_fn = sft.loss_function(cfg.parallel.compile)
    if choice is not None:
        log(choice.summary())
    meter = ThroughputMeter(local_tokens, fpt, peak, cfg.timing_warmup)
    log(f"model {cfg.model}: {n_params:,} parameters ({n_non_embedding:,} without embedding), "
        f"{fpt / 1e9:.3f} GFLOPs/token; world {env.world_size} on {device.type}, "
        f"mesh {tuple(mesh.shape)} {mesh.mesh_dim_names}")

    start_step, losses, load_timing = 0, [], None
    completed = _latest_checkpoint(cfg, mesh)
    if completed is not None:
        state, load_timing = checkpoint.load(cfg.ckpt_dir, completed, model, optimizer)  # type: ignore[arg-type]
        scheduler.load_state_dict(state["scheduler"])
        start_step, losses = state["step"], [tuple(x) for x in state["losses"]]
        log(f"resumed from the step-{start_step} checkpoint in {load_timing.seconds:.2f}s "
            f"({load_timing.gb_per_s:.2f} GB/s)")

    saves: list[checkpoint.Timing] = []
    timer = stragglers.RankTimer()
    clock, parts = breakdown.PhaseClock(device), breakdown.StepParts()
    probe = torch.randn(256, 256, device=device) if cfg.probe_matmuls else None
    memory.mark(None)  # model construction and checkpoint loading are not training
    # each step's rows are built (and on GPUs copied) before its timer starts
    batch = data.local_batch(start_step + 1, device) if start_step < cfg.steps else None
    extras: list[dict[str, Any]]
    for step in range(start_step + 1, cfg.steps + 1):
        assert batch is not None
        inputs, targets, *extras = batch  # sft rows also carry positions, mask, loss scale
        start = time.perf_counter()
        clock.start()
        if extras:
            logits = model(inputs, extras[0]["positions"], extras[0]["mask"])
            loss = sft_loss_fn(logits, targets) * extras[0]["scale"]
        else:
            logits = model(inputs)
            loss = loss_fn(logits, targets)
        loss.backward()
        clock.mark()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.max_grad_norm)
        clock.mark()
        local_start = _synced_now(device)  # the norm's all-reduce lines the ranks up here
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        lr = float(scheduler.get_last_lr()[0])
        scheduler.step()
        if probe is not None:
            stragglers.compute_probe(probe, cfg.probe_matmuls)
        clock.mark()
        sync_start = _synced_now(device)
        loss_value = mesh_mean(loss, mesh)  # .item() also waits for the GPU
        clock.mark()
        seconds = time.perf_counter() - start
        meter.record(seconds)
        timed = meter.seen > cfg.timing_warmup
        if timed:
            timer.record(seconds, sync_start - local_start, start + seconds - sync_start)
            fwd_bwd, clip, update, loss_sync = clock.spans()
            parts.add(fwd_bwd=fwd_bwd, optimizer=update, sync=clip + loss_sync)
        phase = "train" if timed else None
        if meter.seen == cfg.timing_warmup:
            memory.mark(None)
        data_start = time.perf_counter()
        if step < cfg.steps:
            batch = data.local_batch(step + 1, device)
        if timed:
            parts.add(data=time.perf_counter() - data_start)
        losses.append((step, loss_value))
        if step % cfg.log_every == 0 or step == cfg.steps:
            _log_step(step, loss_value, _scalar(grad_norm), lr, seconds, meter, device)
        if cfg.ckpt_dir is not None and cfg.ckpt_every > 0 and step % cfg.ckpt_every == 0:
            train_state = {"step": step, "scheduler": scheduler.state_dict(),
                           "data_next_step": step + 1, "losses": losses}
            ckpt_start = time.perf_counter()
            memory.mark(phase)
            timing = checkpoint.save(cfg.ckpt_dir, step, model, optimizer, train_state,
                                     cfg.ckpt_keep)
            memory.mark("checkpoint")
            saves.append(timing)
            if timed:
                parts.add(checkpoint=time.perf_counter() - ckpt_start)
            log(f"checkpoint step {step}: {timing.bytes / 1e9:.3f} GB in {timing.seconds:.2f}s "
                f"({timing.gb_per_s:.2f} GB/s)")
        if timed:
            parts.add(step=time.perf_counter() - start)
            parts.count()
        if completed is None:
            _test_hooks(step)

    memory.mark("train" if meter.seen > cfg.timing_warmup else None)
    mem = [None if x < 0 else x for x in mesh_max(memory.figures(), mesh, device)]
    straggler = stragglers.judge(_per_rank_timings(timer, env, mesh, device))
    step_parts = _breakdown(cfg, parts, clock, model, batch_for_reference(data, cfg, device),
                            n_params, env, mesh, device)
    log(stragglers.describe(straggler))
    mesh_barrier(mesh)
    measured = list(range(cfg.steps - len(meter.step_times) + 1, cfg.steps + 1))
    workload = (sft.summary(data, measured, meter.step_times, env.world_size, fpt, peak)
                if isinstance(data, sft.PackedBatches) else {})
    return {
        "params": {**_params(cfg, env, mesh, n_params, n_non_embedding, device, peak, data),
                   "defaults": choice.to_dict() if choice is not None else None,
                   "fp8": cfg.parallel.fp8,
                   "loss": "compiled" if cfg.parallel.compile else "eager",
                   "optimizer_kernels": "fused" if device.type == "cuda" else "foreach"},
        "metrics": {
            **sft.real_figures(meter.summary(), workload),
            "flops_per_token": fpt,
            "peak_tflops": peak,
            "peak_tflops_source": peak_source,
            "mfu_dtype": dtype,
            "peak_memory_gib": mem[0],
            "peak_memory_reserved_gib": mem[1],
            "checkpoint_peak_memory_gib": mem[2],
            "checkpoint_peak_memory_reserved_gib": mem[3],
            "peak_memory_kind": memory.kind,
            "final_loss": losses[-1][1] if losses else None,
            "losses": [list(x) for x in losses],
            "resumed_from_step": start_step if completed is not None else None,
            "checkpoint_saves": [t.to_dict() for t in saves],
            "checkpoint_load": load_timing.to_dict() if load_timing else None,
            "stragglers": straggler,
            "breakdown": step_parts,
            **({"sft": workload} if workload else {}),
        },
    }


def batch_for_reference(data: TokenBatches, cfg: TrainConfig, device: torch.device
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    # inputs and targets only: an sft batch also carries its masks and positions
    return data.local_batch(cfg.steps, device)[:2]


def _breakdown(cfg: TrainConfig, parts: breakdown.StepParts, clock: breakdown.PhaseClock,
               model: Any, batch: tuple[torch.Tensor, torch.Tensor], n_params: int,
               env: distenv.DistEnv, mesh: Any, device: torch.device) -> dict[str, Any]:
    """Every rank's step parts and link figure (collective: all ranks call it)."""
    passes = cfg.breakdown_ref_steps
    if passes and not breakdown.fits_gathered(n_params, device):
        passes = 0
    compute_s = breakdown.compute_reference(model, batch, passes, device)
    gbps, probe_note = breakdown.link_probe(int(cfg.link_probe_mb * 1e6), mesh, device)
    own = parts.means(compute_s)
    keys = ("step", "fwd_bwd", *breakdown.PARTS)
    rows = _gather_rows([*(own[k] for k in keys), gbps if gbps is not None else -1.0],
                        env, mesh, device)
    per_rank = []
    for row in rows:
        values = dict(zip(keys, row["values"], strict=False))
        link = row["values"][len(keys)]
        per_rank.append({"rank": row["rank"], "node": row["node"], **values,
                         "link_recv_gb_per_s": link if link >= 0 else None})
    mean = {k: statistics.fmean(r[k] for r in per_rank) for k in keys} if per_rank else {}
    return {
        "timed_steps": parts.steps,
        "mean_over_ranks": mean,
        "per_rank": per_rank,
        "parts": list(breakdown.PARTS),
        "clock": clock.how,
        "measured": {**breakdown.MEASURED_BY,
                     "compute": breakdown.MEASURED_BY["compute"]
                     + f" ({passes} passes)" if compute_s is not None else
                     "not measured (--breakdown-ref-steps 0, or the gathered model would not "
                     "fit in device memory): counted as fwd_bwd, so exposed_comm is 0"},
        "link_probe": {"bytes": int(cfg.link_probe_mb * 1e6), "repeats": breakdown.PROBE_REPEATS,
                       "note": probe_note or "each rank receives from both ring neighbours "
                       "while the others wait; its slower neighbour's best GB/s"},
    }


def _gather_rows(values: list[float], env: distenv.DistEnv, mesh: Any,
                 device: torch.device) -> list[dict[str, Any]]:
    """Every rank's ``values`` (same length on every rank) and node name, on every rank."""
    world, rank, width = dist.get_world_size(), dist.get_rank(), len(values) + 1
    flat = [0.0] * (world * width)
    flat[rank * width:(rank + 1) * width] = [*values, float(env.node_rank)]
    everyone = mesh_sum(flat, mesh, device)
    names = _node_names()
    rows = []
    for r in range(world):
        row = everyone[r * width:(r + 1) * width]
        idx = int(row[-1])
        rows.append({"rank": r, "node": names[idx] if idx < len(names) else f"node {idx}",
                     "values": row[:-1]})
    return rows


def _node_names() -> list[str]:
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    return distenv.expand_hostlist(nodelist) if nodelist else []


def _synced_now(device: torch.device) -> float:
    """perf_counter after the device's queued work is done (GPU kernels run asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def _per_rank_timings(timer: stragglers.RankTimer, env: distenv.DistEnv, mesh: Any,
                      device: torch.device) -> list[dict[str, Any]]:
    """Every rank's medians and node, on every rank (one sum over the mesh)."""
    world, rank, width = dist.get_world_size(), dist.get_rank(), 4
    values = [0.0] * (world * width)
    values[rank * width:(rank + 1) * width] = [*timer.medians(), float(env.node_rank)]
    everyone = mesh_sum(values, mesh, device)
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    names = distenv.expand_hostlist(nodelist) if nodelist else []
    rows = []
    for r in range(world):
        step_s, local_s, wait_s, node = everyone[r * width:(r + 1) * width]
        idx = int(node)
        rows.append({"rank": r, "node": names[idx] if idx < len(names) else f"node {idx}",
                     "step_s": step_s, "local_s": local_s, "sync_wait_s": wait_s})
    return rows


def _scalar(value: torch.Tensor | float) -> float:
    """A float from a tensor or a DTensor (clip_grad_norm_ returns one under FSDP)."""
    full = getattr(value, "full_tensor", None)
    return float(full() if full is not None else value)


def _test_hooks(step: int) -> None:
    """benchmarks.faultpoints: fsdp-crash-at-step, fsdp-hold-after-step."""
    if step == faultpoints.number("fsdp-crash-at-step"):
        print(f"fault point fsdp-crash-at-step={step}: exiting hard", flush=True)
        os._exit(17)
    if step == faultpoints.number("fsdp-hold-after-step"):
        log(f"fault point fsdp-hold-after-step={step}: holding for up to 10 minutes")
        time.sleep(600)


def _latest_checkpoint(cfg: TrainConfig, mesh: Any) -> int | None:
    if cfg.ckpt_dir is None or not cfg.resume:
        return None
    # rank 0 decides, so every rank loads the same step even if storage caches disagree
    found = mesh_broadcast(
        checkpoint.complete_steps(cfg.ckpt_dir)[-1:] if dist.get_rank() == 0 else None, mesh)
    return found[0] if found else None


def _log_step(step: int, loss: float, grad_norm: float, lr: float, seconds: float,
              meter: ThroughputMeter, device: torch.device) -> None:
    figures = meter.last(seconds)
    mfu = f" mfu {figures['mfu']:.1%}" if figures["mfu"] is not None else ""
    mem, _ = peak_memory_gib(device)
    log(f"step {step:5d}  loss {loss:.4f}  grad_norm {grad_norm:.3f}  lr {lr:.2e}  "
        f"{figures['tokens_per_s_per_gpu']:,.0f} tok/s/gpu  "
        f"{figures['tflops_per_gpu']:.2f} TFLOPs/gpu{mfu}  mem {mem:.2f} GiB  "
        f"{seconds * 1000:.0f} ms")


def _params(cfg: TrainConfig, env: distenv.DistEnv, mesh: Any, n_params: int,
            n_non_embedding: int, device: torch.device, peak: float | None,
            data: TokenBatches) -> dict[str, Any]:
    return {
        "model": cfg.model,
        "workload": cfg.workload,
        "model_args": preset(cfg.model).to_dict(),
        "n_params": n_params,
        "n_params_non_embedding": n_non_embedding,
        "steps": cfg.steps,
        "global_batch_size": sizes(cfg)[0],
        "local_batch_size": sizes(cfg)[0] // env.world_size,
        "seq_len": sizes(cfg)[1],
        "world_size": env.world_size,
        "nodes": env.num_nodes,
        "ranks_per_node": env.local_world_size,
        "mesh": {"shape": list(mesh.shape), "dims": list(mesh.mesh_dim_names)},
        "hsdp": cfg.parallel.hsdp,
        "compile": cfg.parallel.compile,
        "activation_checkpointing": cfg.parallel.activation_checkpointing,
        "param_dtype": compute_dtype(device.type, cfg.parallel.bf16),
        "matmul_dtype": compute_dtype(device.type, cfg.parallel.bf16, cfg.parallel.fp8),
        "reduce_dtype": "float32",
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "backend": dist.get_backend(),
        "optimizer": {**asdict(cfg.optim), "name": "AdamW"},
        "data": {**data.describe(),
                 "built": "this rank's rows only, before the step's timer starts"},
        "seed": cfg.seed,
        "timing_warmup_steps": cfg.timing_warmup,
        "peak_tflops": peak,
        "ckpt_dir": str(cfg.ckpt_dir) if cfg.ckpt_dir else None,
        "ckpt_every": cfg.ckpt_every,
        "slurm_restart_count": int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0),
        "straggler_probe_matmuls": cfg.probe_matmuls,
        "breakdown_ref_steps": cfg.breakdown_ref_steps,
        "link_probe_mb": cfg.link_probe_mb,
    }


def verdict(metrics: dict[str, Any], steps_wanted: int) -> tuple[str, list[str]]:
    status, reasons = _run_verdict(metrics, steps_wanted)
    learning = (metrics.get("rl") or {}).get("learning") or {}
    if status != "FAIL" and learning.get("moved") is False:
        return "WARN", [*reasons, learning["summary"]]
    return status, reasons


def _run_verdict(metrics: dict[str, Any], steps_wanted: int) -> tuple[str, list[str]]:
    losses = metrics["losses"]
    if not losses or losses[-1][0] != steps_wanted:
        return "FAIL", [f"training stopped before step {steps_wanted}"]
    if not all(math.isfinite(loss) for _, loss in losses):
        return "FAIL", ["the loss is not finite"]
    if not metrics.get("measured_steps"):
        return "WARN", ["no step ran after the timing warm-up; throughput not measured"]
    straggler = metrics.get("stragglers") or {}
    if straggler.get("verdict") == "FAIL":
        return "FAIL", [stragglers.describe(straggler)]
    # a compute outlier is a suspect (a node fault, or on a shared host its neighbours):
    # WARN, and `pctk diagnose` weighs it against the link and storage evidence
    slow = stragglers.compute_straggler(metrics.get("breakdown") or {})
    if slow is not None:
        return "WARN", [stragglers.describe_compute(slow)]
    if straggler.get("verdict") == "WARN":
        return "WARN", [stragglers.describe(straggler)]
    return "PASS", []


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """The settings of :class:`benchmarks.fsdp.config.TrainConfig` from the command line."""
    cfg = parse_config(argv, prog="python -m benchmarks.fsdp.train", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    return replace(cfg, probe_matmuls=max(0, cfg.probe_matmuls))


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    env = distenv.detect()
    env.export()
    device = pick_device(cfg.device, env.local_rank)
    if cfg.fp8:
        from benchmarks.fsdp import fp8

        why = fp8.unavailable(device) or (
            "--fp8 and --fp32 exclude each other" if cfg.fp32 else None)
        if why:
            print(f"error: {why}", file=sys.stderr)
            return 2
    if cfg.workload == "sft":
        try:
            sft.read_conversations(cfg.data or sft.DEFAULT_DATA)
        except DataError as exc:
            print(f"error: DataError: {exc}", file=sys.stderr)
            return 2
    vocab = preset(cfg.model).vocab_size
    if cfg.workload == "rl" and cfg.rl_target_token >= vocab:
        print(f"error: --rl-target-token {cfg.rl_target_token} is outside the {cfg.model} "
              f"vocabulary (0..{vocab - 1})", file=sys.stderr)
        return 2
    if cfg.workload == "rl" and cfg.rl_target_width is None:
        cfg = replace(cfg, rl_target_width=max(1, vocab // RL_REWARDED_SHARE))
    if cfg.workload == "rl" and cfg.rl_target_token + (cfg.rl_target_width or 1) > vocab:
        print(f"error: --rl-target-token {cfg.rl_target_token} with --rl-target-width "
              f"{cfg.rl_target_width} reaches past the {cfg.model} vocabulary (0..{vocab - 1})"
              f"; use a target of at most {vocab - (cfg.rl_target_width or 1)} or a narrower "
              "width",
              file=sys.stderr)
        return 2
    shard = env.local_world_size if cfg.hsdp else env.world_size
    cfg, choice = resolve_defaults(cfg, env.world_size, shard, device)
    assert cfg.batch_size is not None
    if cfg.batch_size % env.world_size:
        print(f"error: global batch size {cfg.batch_size} is not divisible by the world size "
              f"{env.world_size}", file=sys.stderr)
        return 2
    backend, mesh_backend = process_group_backends(device)
    dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    try:
        if cfg.workload == "rl":
            from benchmarks.fsdp import rl  # rl builds on this module's pieces

            result = rl.train_rl(cfg, env, device, mesh_backend, choice)
        else:
            result = train(cfg, env, device, mesh_backend, choice)
        if dist.get_rank() == 0 and cfg.out is not None:
            status, reasons = verdict(result["metrics"], cfg.steps)
            rec = record.new_record("fsdp", params=result["params"], metrics=result["metrics"],
                                    status=status, reasons=reasons)
            # the nodes of this run: a step of a bigger allocation (pctk bench scaling) has
            # fewer than SLURM_JOB_NUM_NODES
            rec["cluster"]["nodes"] = env.num_nodes or rec["cluster"]["nodes"]
            record.write_record(cfg.out, rec)
            log(f"record: {cfg.out} ({status})")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
