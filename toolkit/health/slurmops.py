"""The Slurm actions a sweep takes, now in :mod:`toolkit.slurm` (the one Slurm layer);
these names stay for callers written against them."""

from __future__ import annotations

from toolkit.slurm import (  # noqa: F401
    cancel,
    create_reservation,
    delete_reservation,
    drain,
    resume,
)
from toolkit.slurm import job_reason as job_state  # noqa: F401
from toolkit.slurm import sbatch as submit  # noqa: F401
