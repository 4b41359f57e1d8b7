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
    # job in the moment after sbatch; slurmctld not holding it at two looks in a row then
    # makes it "gone" (a controller that restarted without it)
    wait_for(["999999"], poll_s=1, console=Console(file=out), timeout=4.5)
    lines = [ln.split("waiting: ")[1] for ln in out.getvalue().splitlines() if "waiting: " in ln]
    assert lines, out.getvalue()
    assert all("unknown" not in line for line in lines), lines
    assert lines[0].startswith("0/1 jobs done: submitted=1"), lines
    assert lines[-1].startswith("1/1 jobs done: gone=1"), lines
    assert "job 999999 is gone: slurmctld no longer holds it" in out.getvalue()
