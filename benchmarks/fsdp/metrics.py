"""Throughput and MFU accounting, step-time percentiles and peak memory.

The FLOPs per token a meter is given are :func:`benchmarks.modelmath.training_flops_per_token`
(torchtitan's ``6·N + 12·L·H·d_head·T``, no causal halving).
"""

from __future__ import annotations

import math
import resource
import statistics
from dataclasses import dataclass, field

import torch


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        return math.nan
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q) - 1))]


def peak_memory_gib(device: torch.device) -> tuple[float, str]:
    """Peak memory of this process since the last reset, and what was measured."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30, "cuda_max_memory_allocated"
    # Linux reports ru_maxrss in KiB; it cannot be reset, so it covers the whole process
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss_kib / 2**20, "process_max_rss"


@dataclass
class PeakMemory:
    """Peak allocated and reserved device memory per phase: the measured training steps apart
    from checkpoint saves, and neither counting model construction or the warm-up steps.

    ``mark(phase)`` books the peak since the previous mark under ``phase`` (keeping the
    highest) and resets the device counters; phase None books nothing (warm-up). CPU runs have
    only the process's max RSS, which cannot be reset: it is reported as such.
    """

    device: torch.device
    allocated: dict[str, float] = field(default_factory=dict)
    reserved: dict[str, float] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        if self.device.type == "cuda":
            return ("cuda max_memory_allocated / max_memory_reserved, reset after the timing "
                    "warm-up; checkpoint saves apart")
        return "process_max_rss (whole process: cannot be reset)"

    def mark(self, phase: str | None) -> None:
        if self.device.type != "cuda":
            if phase is not None:
                self.allocated[phase] = peak_memory_gib(self.device)[0]
            return
        if phase is not None:
            alloc = torch.cuda.max_memory_allocated(self.device) / 2**30
            reserved = torch.cuda.max_memory_reserved(self.device) / 2**30
            self.allocated[phase] = max(alloc, self.allocated.get(phase, 0.0))
            self.reserved[phase] = max(reserved, self.reserved.get(phase, 0.0))
        torch.cuda.reset_peak_memory_stats(self.device)

    def figures(self) -> list[float]:
        """[train allocated, train reserved, checkpoint allocated, checkpoint reserved], GiB;
        -1 where not measured (a max over ranks keeps -1 only if no rank measured it)."""
        return [self.allocated.get("train", -1.0), self.reserved.get("train", -1.0),
                self.allocated.get("checkpoint", -1.0), self.reserved.get("checkpoint", -1.0)]


@dataclass
class ThroughputMeter:
    """Collects step times after the timing warm-up; turns them into per-GPU figures."""

    tokens_per_step_per_rank: int
    flops_per_token: int
    peak_tflops: float | None
    warmup_steps: int
    step_times: list[float] = field(default_factory=list)
    seen: int = 0

    def record(self, seconds: float) -> None:
        self.seen += 1
        if self.seen > self.warmup_steps:
            self.step_times.append(seconds)

    def last(self, seconds: float) -> dict[str, float | None]:
        """Figures for a single step, for the progress log."""
        tps = self.tokens_per_step_per_rank / seconds
        tflops = tps * self.flops_per_token / 1e12
        mfu = tflops / self.peak_tflops if self.peak_tflops else None
        return {"tokens_per_s_per_gpu": tps, "tflops_per_gpu": tflops, "mfu": mfu}

    def summary(self) -> dict[str, float | int | None]:
        if not self.step_times:
            return {"measured_steps": 0}
        mean = statistics.fmean(self.step_times)
        figures = self.last(mean)
        return {
            "measured_steps": len(self.step_times),
            "step_time_mean_s": mean,
            "step_time_p50_s": percentile(self.step_times, 50),
            "step_time_p90_s": percentile(self.step_times, 90),
            **figures,
        }
