"""AdamW and the learning-rate schedule.

Schedule: linear warm-up from lr/warmup to lr over ``warmup_steps``, then either cosine decay
to ``min_lr_ratio · lr`` at the last step or constant. Both are pure functions of the step,
so a resumed run continues on the same curve once the scheduler's step count is restored.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from benchmarks.fsdp.config import SCHEDULES, OptimConfig

__all__ = ["SCHEDULES", "OptimConfig", "build_optimizer", "lr_factor"]


def lr_factor(step: int, *, warmup: int, total: int, schedule: str, min_ratio: float) -> float:
    """Multiplier of the peak lr for optimizer step ``step`` (0-based)."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    decay_steps = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / decay_steps)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def implementation(model: nn.Module) -> dict[str, bool]:
    """AdamW's kernels: fused (one kernel for the whole update, torchtitan's default) on
    GPUs, foreach (one kernel per group of tensors) elsewhere. Same update, same dtype."""
    if next(model.parameters()).device.type == "cuda":
        return {"fused": True}
    return {"foreach": True}


def build_optimizer(model: nn.Module, cfg: OptimConfig, total_steps: int
                    ) -> tuple[torch.optim.Optimizer, LambdaLR]:
    if cfg.schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {cfg.schedule!r}; use one of {', '.join(SCHEDULES)}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas,
                                  weight_decay=cfg.weight_decay, **implementation(model))
    schedule = partial(lr_factor, warmup=cfg.warmup_steps, total=total_steps,
                       schedule=cfg.schedule, min_ratio=cfg.min_lr_ratio)
    return optimizer, LambdaLR(optimizer, schedule)
