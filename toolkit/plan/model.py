"""The arithmetic of a training plan beyond the model's own: GPU-hours, the shard group that
fits, checkpoints, failures.

Pure Python, no torch. Units: FLOPs as counts, memory in bytes (GiB = 2^30 bytes in output),
checkpoint throughput in GB/s (10^9 bytes per second), time in hours unless named otherwise.

FLOPs per token and memory per GPU are the model's, shared with the node
(:mod:`benchmarks.modelmath`): :func:`~benchmarks.modelmath.training_flops_per_token`, the
torchtitan convention ``pctk bench fsdp`` counts MFU with, and
:func:`~benchmarks.modelmath.memory`, the FSDP2 layout it trains with. GPU-hours are
``FLOPs / (peak × MFU)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchmarks.modelmath import OPTIM_BYTES, PARAM_BYTES, Shape, memory

# Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (Chinchilla),
# arXiv 2203.15556: compute-optimal training uses about 20 tokens per parameter.
CHINCHILLA_TOKENS_PER_PARAM = 20.0
CHINCHILLA_SOURCE = ("Hoffmann et al. 2022, Training Compute-Optimal Large Language Models "
                     "(arXiv 2203.15556): about 20 tokens per parameter")

# a distributed checkpoint holds the fp32 parameters and both AdamW moments
CHECKPOINT_BYTES_PER_PARAM = PARAM_BYTES + OPTIM_BYTES


class PlanError(ValueError):
    """Inputs no plan can satisfy (negative tokens, a model larger than the cluster, ...)."""


def gpu_hours(flops: float, peak_tflops: float, mfu: float) -> float:
    """GPU-hours to do ``flops`` at ``mfu`` of a dense ``peak_tflops`` per GPU."""
    return flops / (peak_tflops * 1e12 * mfu) / 3600


# --- memory (the arithmetic is benchmarks.modelmath's, shared with the node) -----------

def node_aligned(shard: int, gpus_per_node: int) -> bool:
    """Whether shard groups of ``shard`` GPUs leave every node whole: a divisor of a node's
    GPUs (the groups stay inside a node, on NVLink) or a whole number of nodes."""
    return gpus_per_node % shard == 0 or shard % gpus_per_node == 0


def smallest_shard(shape: Shape, gpus: int, seq_len: int, micro_batch: int, usable: float,
                   ac: bool, gpus_per_node: int = 1) -> int | None:
    """The smallest node-aligned shard size (:func:`node_aligned`) dividing ``gpus`` at which
    the plan fits, or None."""
    for shard in range(1, gpus + 1):
        if gpus % shard == 0 and node_aligned(shard, gpus_per_node) and \
                memory(shape, shard, seq_len, micro_batch).total(ac) <= usable:
            return shard
    return None


# --- checkpoints and failures -------------------------------------------------------------

def checkpoint_bytes(shape: Shape) -> int:
    return CHECKPOINT_BYTES_PER_PARAM * shape.params


def young_daly_interval_h(checkpoint_h: float, mtbf_job_h: float) -> float:
    """Young's first-order optimum, sqrt(2·C·M), in hours (Young 1974; Daly 2006)."""
    return math.sqrt(2 * checkpoint_h * mtbf_job_h)


@dataclass(frozen=True)
class Overhead:
    interval_h: float
    checkpoint_fraction: float  # of wall time spent writing checkpoints
    failure_fraction: float  # of wall time lost to failures: rework and restarts
    wall_h: float
    failures: float
    lost_to_failures_h: float
    checkpoint_h_total: float


def overhead(compute_h: float, checkpoint_h: float, mtbf_job_h: float,
             restart_h: float) -> Overhead:
    """Wall time of ``compute_h`` hours of training with checkpoints every Young/Daly
    interval and failures every ``mtbf_job_h``: each failure costs the restart plus, on
    average, half an interval of lost work."""
    tau = young_daly_interval_h(checkpoint_h, mtbf_job_h)
    ckpt_frac = checkpoint_h / tau if tau > 0 else 0.0
    fail_frac = (tau / 2 + restart_h) / mtbf_job_h
    useful = 1.0 - ckpt_frac - fail_frac
    if useful <= 0.05:
        raise PlanError(
            f"the job fails every {mtbf_job_h:.2g} h on average and a checkpoint takes "
            f"{checkpoint_h * 60:.3g} min: the run would spend nearly all its time "
            "checkpointing and redoing lost work",
            "fewer nodes, a higher --node-mtbf-hours, or faster checkpoint storage")
    wall = compute_h / useful
    failures = wall / mtbf_job_h
    return Overhead(tau, ckpt_frac, fail_frac, wall, failures, wall * fail_frac,
                    wall * ckpt_frac)
