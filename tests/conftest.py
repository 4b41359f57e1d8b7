"""Shared fixtures. The local twin is started once per test session, on a real Slurm."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.twinutil import TwinHandle
from toolkit.local.twin import Twin

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session", autouse=True)
def _private_state_home() -> Iterator[Path]:
    """Benchmarks store their results as they finish: keep that out of the user's own state."""
    home = Path(tempfile.mkdtemp(prefix="pctk-home-", dir="/tmp"))
    mp = pytest.MonkeyPatch()
    mp.setenv("PCTK_HOME", str(home))
    mp.delenv("PCTK_RESULTS_DB", raising=False)
    yield home
    mp.undo()


@pytest.fixture(scope="session")
def twin() -> Iterator[TwinHandle]:
    """The p5-training preset as a running twin (gpu: gpu-st-p5-[1-4], cpu: cpu-dy-c5-[1-4]).

    SLURM_CONF is exported for the whole session so sbatch, sacct and submitit reach it.
    """
    # short path: munge and MariaDB sockets live inside it
    state = Path(tempfile.mkdtemp(prefix="pctk-twin-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="pctk-jobs-", dir="/tmp"))
    t = Twin(state)
    t.up("p5-training", nodes=4)
    mp = pytest.MonkeyPatch()
    for k, v in t.env().items():
        mp.setenv(k, v)
    try:
        yield TwinHandle(twin=t, env=dict(os.environ), workdir=work)
    finally:
        mp.undo()
        t.down(purge=True)


@pytest.fixture(autouse=True)
def _session_twin_env(request: pytest.FixtureRequest,
                      monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that asks for the session twin sees that twin's environment.

    Modules with a twin of their own export its SLURM_CONF for the module and restore the
    previous environment afterwards; when the session twin was first started inside such a
    module, that restore wiped the session twin's variables for every later test.
    """
    if "twin" in request.fixturenames:
        handle: TwinHandle = request.getfixturevalue("twin")
        for k, v in handle.twin.env().items():
            monkeypatch.setenv(k, v)
    yield
