"""Another user's `pctk local status` / `down` on a twin they cannot read: one line, the truth.

It used to be "stopped" (exit 3) for a running twin, whose twin.json is private, and a
PermissionError traceback from `down` on the lock file.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.twin

REPO = Path(__file__).resolve().parents[2]
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _nobody_python() -> tuple[str, str] | None:
    """(interpreter, PYTHONPATH) with which the nobody account runs this checkout's pctk:
    this Python, else the system's of the same version (this one may sit in a 0700 home)."""
    paths = sysconfig.get_paths()
    pythonpath = os.pathsep.join(dict.fromkeys([str(REPO), paths["purelib"], paths["platlib"]]))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for exe in (sys.executable, f"/usr/bin/python{version}"):
        r = subprocess.run([*AS_NOBODY, "env", f"PYTHONPATH={pythonpath}", exe, "-c",
                            "import toolkit.cli"], capture_output=True, timeout=60, cwd="/")
        if r.returncode == 0:
            return exe, pythonpath
    return None


def _pctk(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *argv], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=env)


def _one_line_exit_2(r: subprocess.CompletedProcess[str], *words: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    for w in words:
        assert w in line, line
    return line


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="acting as another user needs root and setpriv")
def test_another_user_is_told_whose_twin_runs_and_cannot_stop_it():
    python = _nobody_python()
    if python is None:
        pytest.skip("the nobody account cannot run this checkout's Python with its packages "
                    "(a folder on the way is private): the check needs them readable")
    exe, pythonpath = python
    base = Path(tempfile.mkdtemp(prefix="pctk-ou-", dir="/tmp"))
    base.chmod(0o755)
    home = base / "state"
    me = pwd.getpwuid(os.geteuid()).pw_name
    env = {k: v for k, v in os.environ.items()
           if k not in ("PCTK_TWIN_DIR", "PCTK_JOBS_DIR", "PCTK_RESULTS_DB", "SLURM_CONF")}
    env["PCTK_HOME"] = str(home)

    def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*AS_NOBODY, "env", f"PCTK_HOME={home}",
                               f"PYTHONPATH={pythonpath}", exe, "-m", "toolkit.cli", *argv],
                              capture_output=True, text=True, timeout=120, cwd="/", env=env)

    try:
        up = _pctk(env, "local", "up", "-c", "p5-training", "--nodes", "1", "--no-accounting")
        assert up.returncode == 0, up.stderr
        running = f"a twin of another user ({me}) runs in"
        for verb in ("status", "down"):
            _one_line_exit_2(as_nobody("local", verb), running, "permission denied")
        # folders an older pctk made world-readable: twin.json is still private
        twin = home / "twin" / "p5_training"
        for d in (home, home / "twin", twin):
            d.chmod(0o755)
        for verb in ("status", "down"):
            _one_line_exit_2(as_nobody("local", verb), running, "permission denied")
        assert _pctk(env, "local", "status").returncode == 0  # still running, untouched

        assert _pctk(env, "local", "down").returncode == 0
        for verb in ("status", "down"):
            _one_line_exit_2(as_nobody("local", verb), "permission denied", f"belongs to {me}")
    finally:
        _pctk(env, "local", "down", "--purge")
        shutil.rmtree(base, ignore_errors=True)
