"""``--workload rl``: a GRPO-style loop on the FSDP model, timed per phase.

Each iteration, on every rank, for this rank's share of the global batch of prompts:

1. **weight sync**: the FSDP shards are gathered into full weights (``get_model_state_dict``
   with ``full_state_dict``: one all-gather per tensor) and copied into a plain rollout copy
   of the model, the step that moves the trained weights to the generator in verl or TRL;
2. **generation**: ``--rl-group`` samples per prompt from the rollout copy, KV-cache decoding
   (benchmarks/fsdp/decode.py): one prefill, then one cached pass per new token;
3. **reward**: rule-based, the fraction of generated tokens whose id is in the rewarded
   band ``--rl-target-token`` .. ``+ --rl-target-width - 1`` (the stand-in for a verifier:
   math answer checkers, unit tests);
4. **training**: advantages relative to each prompt's group ``(r - mean) / (std + eps)``,
   then ``--rl-updates`` optimizer steps on the clipped policy-gradient objective (PPO's
   ratio clip, old log-probabilities from the first update's forward, no KL term), under
   FSDP like pre-training.

The defaults are chosen so that the tiny model learns within a benchmark's iterations (on
one CPU rank: reward 0.07 -> 0.5 in 10 iterations at the node's default batch of 8 prompts,
-> 1.0 in 20), and the record says whether it did:

- the reward band is a sixteenth of the vocabulary (32 of tiny's 512 ids): a random policy
  scores about 0.06, so most groups hold samples that differ and carry an advantage. A
  single rewarded id (``--rl-target-width 1``) has a chance of 1/512 per token: a few
  hundred sampled tokens an iteration rarely hit it, every group scores 0 and the gradient
  is 0;
- 8 samples per prompt (``--rl-group``; GRPO uses 8 to 64): with 4, the group mean and
  std are too noisy for the advantage to point at the band;
- the learning rate on the tiny and small shapes is ``config.RL_LR`` (2e-2) rather than
  pre-training's 3e-4, which moves a random tiny policy too little to show in tens of
  iterations (``--lr`` overrides it; the Llama shapes keep 3e-4: a real RL run on them
  would use about 1e-6, and a random 8B learns nothing in 20 iterations either way);
- 4 updates per batch of rollouts (PPO's several epochs, GRPO's mu): with one, the ratio
  new/old is exactly 1 and the clip never engages. At this learning rate a random tiny
  model's first Adam steps move many sampled tokens past the clip (``clip_fraction`` per
  iteration in the record, often half the tokens early on, falling as the policy settles):
  high for a real run, where 0.1 to 0.3 is usual, and the reason the clip is there.

``learning`` in the record compares the mean reward of the first and the last quarter of
the iterations; a rise below ``MIN_REWARD_RISE`` is reported as "the reward did not rise"
and makes the verdict WARN: a loop that is fast but learns nothing is a broken benchmark.
This is a tiny model and a synthetic reward; learning here shows that the loop's pieces
(sampling, advantages, the clipped update, the weight sync) fit together, not that a real
model would learn a real task.

The record's ``metrics.rl`` gives every iteration's phase times, the mean split, each
phase's tokens/s and the phase that bounds the loop (the longest).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from benchmarks import distenv
from benchmarks.fsdp import decode, stragglers
from benchmarks.fsdp.meshcomm import mesh_barrier, mesh_max, mesh_mean, mesh_sum
from benchmarks.fsdp.metrics import PeakMemory, ThroughputMeter
from benchmarks.fsdp.model import Transformer, count_params
from benchmarks.fsdp.optim import build_optimizer
from benchmarks.fsdp.parallelize import build_mesh, compute_dtype, materialise, parallelize
from benchmarks.fsdp.train import (
    _params,
    _per_rank_timings,
    _synced_now,
    build_model,
    log,
    peak_for,
    sizes,
)
from benchmarks.modelmath import forward_flops_per_token, shape_of, training_flops_per_token

PHASES = ("weight_sync", "generation", "reward", "training")
CLIP = 0.2
ADV_EPS = 1e-4
MIN_REWARD_RISE = 0.05  # of a reward in [0, 1]: less is not counted as learning


class Prompts:
    """Synthetic prompts: row i of iteration s is a function of (seed, s, i), like
    SyntheticBatches; each rank builds only its own rows."""

    def __init__(self, vocab: int, seed: int, batch_size: int, prompt_len: int, rank: int,
                 world_size: int):
        if batch_size % world_size:
            raise ValueError(f"global batch size {batch_size} is not divisible by the world "
                             f"size {world_size}")
        self.vocab, self.seed, self.prompt_len = vocab, seed, prompt_len
        self.rows = range(rank * batch_size // world_size, (rank + 1) * batch_size // world_size)

    def local(self, step: int, device: torch.device) -> torch.Tensor:
        out = []
        for row in self.rows:
            gen = torch.Generator().manual_seed((self.seed * 1_000_003 + step) * 65_537 + row)
            out.append(torch.randint(self.vocab, (self.prompt_len,), generator=gen))
        return torch.stack(out).to(device)

    def describe(self) -> dict[str, Any]:
        return {"source": "synthetic prompts", "seed": self.seed,
                "prompt_len": self.prompt_len}


def rewards(completions: torch.Tensor, target: int, width: int = 1) -> torch.Tensor:
    """Fraction of each completion's tokens whose id is in ``target .. target + width - 1``."""
    return ((completions >= target) & (completions < target + width)).float().mean(dim=1)


def group_advantages(reward: torch.Tensor, group: int) -> torch.Tensor:
    """(r - group mean) / (group std + eps), rows grouped in consecutive runs of ``group``."""
    r = reward.view(-1, group)
    return ((r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, keepdim=True) + ADV_EPS)).flatten()


def completion_logprobs(model: torch.nn.Module, sequences: torch.Tensor, prompt_len: int
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities (batch, new) of the generated tokens under ``model`` and the full
    log-softmax rows they came from."""
    logits = model(sequences[:, :-1])[:, prompt_len - 1:].float()
    logp = torch.log_softmax(logits, dim=-1)
    taken = logp.gather(-1, sequences[:, prompt_len:, None])[..., 0]
    return taken, logp


def policy_loss(logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Clipped surrogate, mean over the generated tokens (equal counts on every rank), and
    the fraction of tokens the clip holds back (ratio past 1 +- CLIP in the direction its
    advantage pushes, so their gradient is 0; TRL's and verl's ``clip_ratio``)."""
    ratio = torch.exp(logp - old)
    a = adv[:, None]
    unclipped = ratio * a
    clipped = ratio.clamp(1 - CLIP, 1 + CLIP) * a
    held = ((ratio > 1 + CLIP) & (a > 0)) | ((ratio < 1 - CLIP) & (a < 0))
    return -torch.minimum(unclipped, clipped).mean(), held.float().mean().detach()


@dataclass
class PolicyUpdate:
    """What one batch of rollouts' updates leave: the last loss, the probability mass the
    policy gave the rewarded band before the first update, each update's clipped fraction,
    and the clock before the last optimizer step (the local part of the straggler timing)."""

    loss: torch.Tensor
    rewarded_mass: float
    clip_fractions: list[float]
    local_start: float


def update_policy(model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                  sequences: torch.Tensor, prompt_len: int, adv: torch.Tensor, updates: int,
                  max_grad_norm: float, rewarded: range, clock: Callable[[], float]
                  ) -> PolicyUpdate:
    """``updates`` optimizer steps on the clipped objective, old log-probabilities from the
    first forward (the policy that generated ``sequences``)."""
    old: torch.Tensor | None = None
    mass = 0.0
    held: list[torch.Tensor] = []
    loss = torch.zeros(())
    local_start = clock()
    for _update in range(updates):
        logp, rows = completion_logprobs(model, sequences, prompt_len)
        if old is None:
            old = logp.detach()
            band = rows[..., rewarded.start:rewarded.stop].detach()
            mass = float(band.exp().sum(dim=-1).mean())
        loss, clipped = policy_loss(logp, old, adv)
        held.append(clipped)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        local_start = clock()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
    return PolicyUpdate(loss.detach(), mass, torch.stack(held).tolist(), local_start)


def reward_trend(curve: Sequence[float]) -> dict[str, Any]:
    """Whether the mean reward rose: the first and the last quarter of the iterations (at
    least one each) compared; ``moved`` is None with fewer than two iterations."""
    n = len(curve)
    if n < 2:
        return {"iterations": n, "moved": None,
                "summary": "fewer than 2 iterations: whether the reward moved is not judged"}
    k = max(1, n // 4)
    first, last = sum(curve[:k]) / k, sum(curve[-k:]) / k
    rise = last - first
    moved = rise >= MIN_REWARD_RISE
    trend = f"{first:.2f} -> {last:.2f} over {n} iterations"
    window = f"mean of the first and the last {k}" if k > 1 else "first and last iteration"
    summary = (f"reward {trend} ({window})" if moved else
               f"the reward did not rise: {trend} ({window}; a rise of at least "
               f"{MIN_REWARD_RISE:.2f} counts as learning); check --lr and whether a random "
               "policy ever earns a reward (--rl-target-width, --rl-group)")
    return {"iterations": n, "window": k, "first": first, "last": last, "rise": rise,
            "min_rise": MIN_REWARD_RISE, "moved": moved, "summary": summary}


def sync_weights(model: torch.nn.Module, rollout: Transformer) -> int:
    """Gather the FSDP shards into ``rollout``; the bytes moved into it."""
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    moved = 0
    with torch.no_grad():
        for name, dest in rollout.state_dict().items():
            src = full[name]
            dest.copy_(src)
            moved += dest.numel() * dest.element_size()
    return moved


def train_rl(cfg: Any, env: distenv.DistEnv, device: torch.device,
             mesh_backend: str | None = None, choice: Any = None) -> dict[str, Any]:
    memory = PeakMemory(device)
    batch_size, _ = sizes(cfg)
    plen, new, group = cfg.rl_prompt_len, cfg.rl_new_tokens, cfg.rl_group
    seq_len = plen + new - 1  # the training forward's length
    cfg = replace(cfg, seq_len=max(seq_len, 1))
    model, meta = build_model(cfg, device)
    n_params, n_non_embedding = count_params(model)
    mesh = build_mesh(device.type, env.world_size, env.local_world_size, cfg.parallel.hsdp,
                      mesh_backend)
    model = parallelize(model, mesh, cfg.parallel)
    if meta:
        torch.manual_seed(cfg.seed + env.rank)
        materialise(model, device)
    optimizer, scheduler = build_optimizer(model, cfg.optim, cfg.steps * cfg.rl_updates)
    prompts = Prompts(model.args.vocab_size, cfg.seed, batch_size, plen, env.rank,
                      env.world_size)
    rollout_dtype = (torch.bfloat16 if compute_dtype(device.type, cfg.parallel.bf16)
                     == "bfloat16" else torch.float32)
    with torch.device("meta"):
        rollout = Transformer(model.args)
    rollout = rollout.to_empty(device=device).to(rollout_dtype).eval()
    # the rotary table stays fp32, as in the trained model
    rollout.register_buffer("freqs", model.get_buffer("freqs").detach().clone(),
                            persistent=False)
    gen = torch.Generator(device=device).manual_seed(cfg.seed * 7919 + env.rank)

    dtype = compute_dtype(device.type, cfg.parallel.bf16, cfg.parallel.fp8)
    peak, peak_source = peak_for(cfg, device, dtype)
    local_prompts = len(prompts.rows)
    samples = local_prompts * group
    train_tokens = samples * seq_len * cfg.rl_updates
    gen_tokens = samples * new
    shape = shape_of(model.args)
    fpt = training_flops_per_token(shape, seq_len)
    # generation: the forward pass of a token attending to the cache, ~half the length
    gen_fpt = forward_flops_per_token(shape, plen + new // 2)
    loop_flops = train_tokens * fpt + gen_tokens * gen_fpt + samples * plen * gen_fpt
    meter = ThroughputMeter(gen_tokens, loop_flops // max(1, gen_tokens), peak,
                            cfg.timing_warmup)
    log(f"model {cfg.model}: {n_params:,} parameters; rl: {batch_size} prompts x {group} "
        f"samples, {plen}+{new} tokens, {cfg.rl_updates} update(s) per iteration at lr "
        f"{cfg.optim.lr:g}; world {env.world_size} on {device.type}")

    width = cfg.rl_target_width or 1  # resolved by train.main
    rewarded = range(cfg.rl_target_token, cfg.rl_target_token + width)
    band = (f"{rewarded.start}" if len(rewarded) == 1
            else f"{rewarded.start}..{rewarded.stop - 1}")
    iterations: list[dict[str, Any]] = []
    losses, reward_curve = [], []
    timer = stragglers.RankTimer()
    memory.mark(None)
    sync_bytes = 0
    for step in range(1, cfg.steps + 1):
        batch_prompts = prompts.local(step, device)
        t0 = _synced_now(device)
        sync_bytes = sync_weights(model, rollout)
        t1 = _synced_now(device)
        completions = decode.generate(rollout, batch_prompts.repeat_interleave(group, 0),
                                      new, gen)
        t2 = _synced_now(device)
        reward = rewards(completions, cfg.rl_target_token, width)
        adv = group_advantages(reward, group)
        t3 = _synced_now(device)
        sequences = torch.cat([batch_prompts.repeat_interleave(group, 0), completions], 1)
        done = update_policy(model, optimizer, scheduler, sequences, plen, adv,
                             cfg.rl_updates, cfg.optim.max_grad_norm, rewarded,
                             lambda: _synced_now(device))
        local_start = done.local_start
        t4 = _synced_now(device)
        loss_value = mesh_mean(done.loss, mesh)
        clip_fraction = sum(done.clip_fractions) / len(done.clip_fractions)
        mean_reward, mean_prob, mean_clip = (x / env.world_size for x in mesh_sum(
            [float(reward.mean()), done.rewarded_mass, clip_fraction], mesh, device))
        seconds = t4 - t0
        meter.record(seconds)
        if meter.seen > cfg.timing_warmup:
            timer.record(seconds, local_start - t0, t4 - local_start)
        if meter.seen == cfg.timing_warmup:
            memory.mark(None)
        times = dict(zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True))
        iterations.append({"step": step, **{f"{k}_s": v for k, v in times.items()}})
        losses.append((step, loss_value))
        reward_curve.append((step, mean_reward, mean_prob, mean_clip))
        if step % cfg.log_every == 0 or step == cfg.steps:
            log(f"iter {step:4d}  loss {loss_value:+.4f}  reward {mean_reward:.3f}  "
                f"p(rewarded) {mean_prob:.4f}  clipped {mean_clip:.1%}  " + "  ".join(
                    f"{k} {v * 1000:.0f} ms" for k, v in times.items()))

    memory.mark("train" if meter.seen > cfg.timing_warmup else None)
    mem = [None if x < 0 else x for x in mesh_max(memory.figures(), mesh, device)]
    straggler = stragglers.judge(_per_rank_timings(timer, env, mesh, device))
    mesh_barrier(mesh)
    measured = iterations[cfg.timing_warmup:] if len(iterations) > cfg.timing_warmup else []
    rl = summary(measured, gen_tokens, samples, train_tokens, sync_bytes, fpt, peak)
    learning = reward_trend([x[1] for x in reward_curve])
    rl.update(iterations=iterations, rewards=[list(x[:2]) for x in reward_curve],
              target_prob=[[x[0], x[2]] for x in reward_curve],
              clip_fraction=[[x[0], x[3]] for x in reward_curve],
              clip_fraction_mean=sum(x[3] for x in reward_curve) / len(reward_curve),
              clip=CLIP, learning=learning, group=group,
              prompt_len=plen, new_tokens=new, updates_per_iteration=cfg.rl_updates,
              target_token=cfg.rl_target_token, target_width=width,
              reward_rule=f"fraction of generated tokens with an id in {band}",
              target_prob_means="probability the policy gives the rewarded ids, mean over "
              "the generated positions, before the iteration's first update",
              decoding="KV cache (benchmarks.fsdp.decode), multinomial sampling, T=1",
              rollout_dtype=str(rollout_dtype).removeprefix("torch."))
    log(f"rl: {learning['summary']}")
    log(f"rl: bound by {rl.get('bound_by')}; split " + ", ".join(
        f"{k} {v:.0%}" for k, v in (rl.get("phase_fraction") or {}).items()))
    return {
        "params": {**_params(cfg, env, mesh, n_params, n_non_embedding, device, peak,
                             prompts),  # type: ignore[arg-type]
                   "defaults": None, "fp8": cfg.parallel.fp8, "loss": "eager",
                   "optimizer_kernels": "fused" if device.type == "cuda" else "foreach"},
        "metrics": {
            **meter.summary(),
            "tokens_counted": "generated tokens per second of the whole loop",
            "flops_per_token": meter.flops_per_token,
            "peak_tflops": peak,
            "peak_tflops_source": peak_source,
            "mfu_dtype": dtype,
            "peak_memory_gib": mem[0],
            "peak_memory_reserved_gib": mem[1],
            "peak_memory_kind": memory.kind,
            "final_loss": losses[-1][1] if losses else None,
            "losses": [list(x) for x in losses],
            "resumed_from_step": None,
            "checkpoint_saves": [],
            "checkpoint_load": None,
            "stragglers": straggler,
            "rl": rl,
        },
    }


def summary(measured: list[dict[str, Any]], gen_tokens: int, samples: int,
            train_tokens: int, sync_bytes: int, fpt: int, peak: float | None
            ) -> dict[str, Any]:
    """Mean phase times of the measured iterations, their split, each phase's rate per GPU
    and the phase that bounds the loop."""
    if not measured:
        return {"workload": "rl", "measured_iterations": 0}
    n = len(measured)
    mean = {k: sum(it[f"{k}_s"] for it in measured) / n for k in PHASES}
    total = sum(mean.values())
    train_tps = train_tokens / mean["training"] if mean["training"] else None
    tflops = train_tps * fpt / 1e12 if train_tps else None
    return {
        "workload": "rl",
        "measured_iterations": n,
        "phase_mean_s": mean,
        "phase_fraction": {k: v / total for k, v in mean.items()} if total else {},
        "bound_by": max(mean, key=lambda k: mean[k]),
        "generation_tokens_per_s_per_gpu": gen_tokens / mean["generation"]
        if mean["generation"] else None,
        "reward_samples_per_s_per_gpu": samples / mean["reward"] if mean["reward"] else None,
        "training_tokens_per_s_per_gpu": train_tps,
        "training_tflops_per_gpu": tflops,
        "training_mfu": tflops / peak if tflops and peak else None,
        "weight_sync_gb_per_s": sync_bytes / mean["weight_sync"] / 1e9
        if mean["weight_sync"] else None,
        "weight_sync_bytes": sync_bytes,
    }
