"""The job-id bands that let twins on different xdist workers (and both legs of `make test`)
run torch jobs at once: their jobs' rendezvous ports never meet within a band."""

from __future__ import annotations

import subprocess

import pytest

from benchmarks.distenv import default_master_port
from tests.conftest import BANDS_PER_LEG, JOB_ID_BAND, worker_job_ids
from toolkit.local.plan import RELEASE_FIRST_JOB_ID
from toolkit.submit.jobspec import RDZV_PORT_SHELL


def _ports(first: int, monkeypatch: pytest.MonkeyPatch) -> tuple[set[int], set[int]]:
    """The rendezvous ports of a band's jobs, as the batch scripts (bash evaluates
    RDZV_PORT_SHELL) and the benchmarks (benchmarks.distenv) compute them."""
    ids = range(first, first + JOB_ID_BAND)
    loop = (f"for SLURM_JOB_ID in $(seq {ids.start} {ids.stop - 1}); do "
            f"echo {RDZV_PORT_SHELL}; done")
    batch = {int(p) for p in subprocess.run(["bash", "-c", loop], capture_output=True,
                                             text=True, check=True).stdout.split()}
    distenv = set()
    for i in ids:
        monkeypatch.setenv("SLURM_JOB_ID", str(i))
        distenv.add(default_master_port())
    return batch, distenv


def test_each_worker_of_each_leg_has_a_band_whose_ports_meet_no_other(monkeypatch):
    firsts = [worker_job_ids(f"gw{w}", release)
              for release in ("", "24.11") for w in range(BANDS_PER_LEG)]
    assert firsts[0] == 1 and firsts[BANDS_PER_LEG] == RELEASE_FIRST_JOB_ID
    assert len(set(firsts)) == len(firsts)
    seen_batch: set[int] = set()
    seen_distenv: set[int] = set()
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    for first in firsts:
        assert first is not None
        batch, distenv = _ports(first, monkeypatch)
        assert len(batch) == len(distenv) == JOB_ID_BAND
        assert not batch & seen_batch and not distenv & seen_distenv, first
        seen_batch |= batch
        seen_distenv |= distenv


def test_outside_xdist_there_is_no_band():
    assert worker_job_ids(None, "") is None and worker_job_ids("master", "24.11") is None
