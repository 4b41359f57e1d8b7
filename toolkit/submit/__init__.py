"""Submission: submitit executors tuned for the cluster, from Python, notebooks and the CLI.

The executor (and submitit with it) is imported on first use, so modules that only need the
Slurm layer (``toolkit.slurm``) or the job renderer do not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkit.submit.efa import efa_env
    from toolkit.submit.executor import (
        ClusterExecutor,
        check_picklable,
        distributed_executor,
        max_array_size,
        submit_distributed,
    )

_LAZY = {
    "ClusterExecutor": "toolkit.submit.executor",
    "check_picklable": "toolkit.submit.executor",
    "distributed_executor": "toolkit.submit.executor",
    "max_array_size": "toolkit.submit.executor",
    "submit_distributed": "toolkit.submit.executor",
    "efa_env": "toolkit.submit.efa",
}

__all__ = [
    "ClusterExecutor",
    "check_picklable",
    "distributed_executor",
    "efa_env",
    "max_array_size",
    "submit_distributed",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
