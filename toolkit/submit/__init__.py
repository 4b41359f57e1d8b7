"""Submission: submitit executors tuned for the cluster, from Python, notebooks and the CLI."""

from toolkit.submit.efa import efa_env
from toolkit.submit.executor import (
    ClusterExecutor,
    check_picklable,
    distributed_executor,
    max_array_size,
    submit_distributed,
)

__all__ = [
    "ClusterExecutor",
    "check_picklable",
    "distributed_executor",
    "efa_env",
    "max_array_size",
    "submit_distributed",
]
