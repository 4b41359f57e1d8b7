"""pctk from Python: what the long commands do, with the same options and defaults.

    from toolkit import api

    study = api.scaling_study([1, 2], model="tiny", partition="cpu", steps=8)
    print(study.record["metrics"]["bottleneck"], study.plots)
    run = api.bench_fsdp(2, model="tiny", partition="cpu")
    sweep = api.bench_collectives(2, partition="cpu", ops="all_reduce")
    health = api.health_run(partition="cpu")
    plan = api.plan(model="70b", tokens="2T", days=30)

Each run finds the cluster in use by itself (Slurm's configuration, else the running twin),
shows its progress (``progress=False`` for none), stores its records in the results
database as the command does (``store=False`` to skip, ``db=`` for another file) and, when
interrupted, raises :class:`StoppedWaiting` naming the jobs that keep running. Bad input
raises :class:`PctkError` with a one-line message and its fix. The CLI calls
these functions and only parses and prints. Each name is imported on first use, so ``pctk
plan`` does not load the benchmark drivers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkit.api.benchmarks import (
        BenchResult,
        bench_collectives,
        bench_inference,
        bench_nccl,
        bench_storage,
        inference_job,
        run_inference,
    )
    from toolkit.api.health import HealthRun, SlowNodes, health_run, slow_nodes
    from toolkit.api.planning import plan
    from toolkit.api.training import (
        FsdpResult,
        ScalingStudy,
        bench_fsdp,
        fsdp_job,
        run_fsdp,
        run_scaling,
        scaling_job,
        scaling_study,
    )
    from toolkit.errors import PctkError
    from toolkit.submit.longrun import StoppedWaiting

_LAZY = {
    "BenchResult": "toolkit.api.benchmarks",
    "bench_collectives": "toolkit.api.benchmarks",
    "bench_inference": "toolkit.api.benchmarks",
    "bench_nccl": "toolkit.api.benchmarks",
    "bench_storage": "toolkit.api.benchmarks",
    "inference_job": "toolkit.api.benchmarks",
    "run_inference": "toolkit.api.benchmarks",
    "HealthRun": "toolkit.api.health",
    "SlowNodes": "toolkit.api.health",
    "health_run": "toolkit.api.health",
    "slow_nodes": "toolkit.api.health",
    "plan": "toolkit.api.planning",
    "FsdpResult": "toolkit.api.training",
    "ScalingStudy": "toolkit.api.training",
    "bench_fsdp": "toolkit.api.training",
    "fsdp_job": "toolkit.api.training",
    "run_fsdp": "toolkit.api.training",
    "run_scaling": "toolkit.api.training",
    "scaling_job": "toolkit.api.training",
    "scaling_study": "toolkit.api.training",
    "PctkError": "toolkit.errors",
    "StoppedWaiting": "toolkit.submit.longrun",
}

__all__ = [
    "BenchResult",
    "FsdpResult",
    "HealthRun",
    "PctkError",
    "ScalingStudy",
    "SlowNodes",
    "StoppedWaiting",
    "bench_collectives",
    "bench_fsdp",
    "bench_inference",
    "bench_nccl",
    "bench_storage",
    "fsdp_job",
    "health_run",
    "inference_job",
    "plan",
    "run_fsdp",
    "run_inference",
    "run_scaling",
    "scaling_job",
    "scaling_study",
    "slow_nodes",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
