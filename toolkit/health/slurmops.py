"""The Slurm actions a sweep takes, now in :mod:`toolkit.submit.slurm` (the one Slurm layer);
these names stay for callers written against them."""

from __future__ import annotations

from toolkit.submit.slurm import (  # noqa: F401
    cancel,
    create_reservation,
    delete_reservation,
    drain,
    resume,
)
from toolkit.submit.slurm import job_reason as job_state  # noqa: F401
from toolkit.submit.slurm import sbatch as submit  # noqa: F401
