"""Throughput, FLOPs and MFU accounting, step-time percentiles and peak memory.

FLOPs per token follow torchtitan: ``6·N + 12·L·H·d_head·T`` where N counts the parameters
without the input embedding (a lookup, not a matmul), L the layers, H the query heads,
d_head the head size and T the sequence length. 6N is forward (2N) plus backward (4N) of the
matmuls; the second term is the attention scores and their weighted sum, also forward plus
backward, without halving for the causal mask (as torchtitan and PaLM count it).
"""

from __future__ import annotations

import math
import resource
import statistics
from dataclasses import dataclass, field

import torch

from benchmarks.fsdp.config import ModelArgs

# Dense bf16 tensor-core peak per GPU in TFLOP/s, matched against torch.cuda.get_device_name.
# Sources: NVIDIA datasheets; they print the 2:4-sparsity figure, dense is half of it.
# Longer names first so "H100 PCIe" wins over "H100".
PEAK_BF16_TFLOPS: dict[str, float] = {
    "H100 PCIe": 756.0,  # H100 PCIe datasheet: 1,513 sparse
    "H100": 989.0,  # H100 SXM datasheet: 1,979 sparse
    "H200": 989.0,  # H200 SXM datasheet: 1,979 sparse
    "B200": 2250.0,  # HGX B200 datasheet: 36 PFLOPS sparse for 8 GPUs -> 4.5 each
    "A100": 312.0,  # A100 datasheet: 624 sparse
    "L40S": 362.0,  # L40S datasheet: 362.05 dense, 733 sparse
    # A10G (AWS G5): no public NVIDIA datasheet; 70 is the figure commonly used for it
    # (the A10 datasheet says 125 dense). Override with --peak-tflops when it matters.
    "A10G": 70.0,
}


def peak_tflops_for(device_name: str) -> float | None:
    """Dense bf16 peak for a CUDA device name, or None when the GPU is not in the table."""
    for key, peak in PEAK_BF16_TFLOPS.items():
        if key.lower() in device_name.lower():
            return peak
    return None


def flops_per_token(n_params_non_embedding: int, args: ModelArgs, seq_len: int) -> int:
    """Training FLOPs (forward + backward) per token."""
    attention = 12 * args.n_layers * args.n_heads * args.head_dim * seq_len
    return 6 * n_params_non_embedding + attention


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        return math.nan
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q) - 1))]


def peak_memory_gib(device: torch.device) -> tuple[float, str]:
    """Peak memory of this process and what was measured."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30, "cuda_max_memory_allocated"
    # Linux reports ru_maxrss in KiB
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss_kib / 2**20, "process_max_rss"


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
