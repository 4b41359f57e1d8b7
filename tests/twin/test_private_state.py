"""Everything pctk writes under its state root is its user's: benchmark, health and daemon
logs included. Another user may pass through to what a Slurm client needs (slurm.conf, the
munge socket) but can list nothing and read no log, record or job file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.twin

REPO = Path(__file__).resolve().parents[2]
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _pctk(env: dict[str, str], *argv: str, timeout: float = 300) -> str:
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", *argv], capture_output=True,
                       text=True, timeout=timeout, cwd=REPO, env=env)
    assert r.returncode == 0, (argv, r.stdout[-2000:], r.stderr[-2000:])
    return r.stdout


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AS_NOBODY, *argv], capture_output=True, text=True, timeout=60,
                          cwd="/")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="reading as another user needs root and setpriv")
def test_logs_records_and_daemon_output_are_private_under_the_state_root():
    base = Path(tempfile.mkdtemp(prefix="pctk-p6-", dir="/tmp"))
    base.chmod(0o755)  # a folder anyone may enter: the state root alone must keep them out
    root = base / "state"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PCTK_TWIN_DIR", "PCTK_JOBS_DIR", "PCTK_RESULTS_DB", "SLURM_CONF")}
    env["PCTK_HOME"] = str(root)
    try:
        _pctk(env, "local", "up", "-c", "p5-training", "--nodes", "1", "--no-accounting")
        for line in _pctk(env, "local", "env").splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value.strip("'")
        _pctk(env, "health", "run", "-p", "gpu", "--level", "quick")
        _pctk(env, "bench", "collectives", "-N", "1", "-p", "gpu", "--ntasks-per-node", "2",
              "--max-bytes", "4K", "--iters", "2", "--warmup", "1")
        twin = Path(env["SLURM_CONF"]).parent.parent
        written = {
            "daemon output": twin / "log" / "slurmctld.out",
            "slurmd output": next((twin / "log").glob("slurmd-*.out")),
            "slurmctld log": twin / "ctld" / "slurmctld.log",
            "twin record": twin / "twin.json",
            "health job log": next((root / "health").glob("*/job-*.out")),
            "health record": next((root / "health").glob("*/record.json")),
            "benchmark job log": next((root / "runs").glob("collectives-*/slurm-*.out")),
            "benchmark record": next((root / "runs").glob("collectives-*/record.json")),
            "results database": root / "results.db",
        }
        for what, path in written.items():
            assert path.is_file(), what
            r = _as_nobody("cat", str(path))
            assert r.returncode != 0 and "Permission denied" in r.stderr, f"{what}: {path}"
        # nothing under the root can be listed or read by another user
        found = _as_nobody("find", str(root), "-readable", "-type", "f")
        assert found.stdout.split() == [], found.stdout
        listed = _as_nobody("ls", str(root))
        assert listed.returncode != 0
        # by mode: every folder others can enter (o+x all the way down) they cannot list or
        # write, leaving out Slurm's own spool and the stand-in GPU devices
        enterable = set()
        for dirpath, _dirs, _files in os.walk(root):
            here = Path(dirpath)
            mode = here.stat().st_mode & 0o777
            if (here != root and here.parent not in enterable) or not mode & 0o001:
                continue
            enterable.add(here)
            if "spool" in here.relative_to(root).parts or here.name == "dev":
                continue
            assert mode & 0o006 == 0, f"{here}: {oct(mode)}"
        assert twin / "etc" in enterable and twin / "log" not in enterable
        for path in (twin / "log").iterdir():
            assert path.stat().st_mode & 0o077 == 0, f"{path}: {oct(path.stat().st_mode)}"
        # a Slurm client of any user still reaches the twin's slurm.conf by its path
        assert _as_nobody("head", "-c1", env["SLURM_CONF"]).returncode == 0
    finally:
        subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "down", "--purge"],
                       capture_output=True, timeout=300, cwd=REPO, env=env)
        shutil.rmtree(base, ignore_errors=True)
