"""Where pctk keeps its state: a set-but-empty or root-folder PCTK_HOME is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _pctk(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *argv], capture_output=True,
                          text=True, timeout=120, cwd=REPO, env=env)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PCTK_HOME", "XDG_STATE_HOME", "PCTK_RESULTS_DB", "PCTK_TWIN_DIR",
                        "PCTK_JOBS_DIR")}
    # should pctk fall back to the default home, it lands here, not in the real one
    return {**env, "HOME": str(tmp_path / "home"), **extra}


def _one_line_exit_2(r: subprocess.CompletedProcess[str], *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    for w in words:
        assert w in line, line


def test_pctk_home_root_is_refused_and_creates_nothing():
    existed = Path("/results.db").exists()
    env = _env(Path("/nonexistent-pctk-test"), PCTK_HOME="/")
    try:
        _one_line_exit_2(_pctk(env, "results", "list"), "PCTK_HOME=/", "root folder")
        _one_line_exit_2(_pctk(env, "local", "status"), "PCTK_HOME=/")
        assert existed or not Path("/results.db").exists()
    finally:
        if not existed:
            for leftover in ("/results.db", "/results.db-wal", "/results.db-shm"):
                Path(leftover).unlink(missing_ok=True)


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_pctk_home_is_refused_not_the_default(tmp_path, value):
    env = _env(tmp_path, PCTK_HOME=value)
    _one_line_exit_2(_pctk(env, "results", "list"), "PCTK_HOME is set but empty")
    assert not (tmp_path / "home").exists()


def test_a_named_pctk_home_is_used(tmp_path):
    env = _env(tmp_path, PCTK_HOME=str(tmp_path / "state"))
    r = _pctk(env, "results", "list")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "state" / "results.db").is_file()
