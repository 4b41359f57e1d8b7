"""The wait line counts a job Slurm does not list yet as submitted: a new job showed
``unknown=1`` (submitit's "UNKNOWN" for a job sacct has no row for yet)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from toolkit.submit.wait import wait_for

pytestmark = pytest.mark.twin


def test_a_job_sacct_does_not_list_yet_counts_as_submitted(twin) -> None:
    out = io.StringIO()
    # a job id this twin has not handed out: sacct and squeue have no row for it, as for a
    # job in the moment after sbatch
    wait_for(["999999"], poll_s=1, console=Console(file=out), timeout=2.5)
    lines = out.getvalue().splitlines()
    assert lines, "no progress line"
    assert all("unknown" not in line for line in lines), lines
    assert lines[-1].split("waiting: ")[1].startswith("0/1 jobs done: submitted=1")
