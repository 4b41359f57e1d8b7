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


def _nobody_python(base: Path) -> tuple[str, str] | None:
    """(interpreter, PYTHONPATH) with which the nobody account runs this checkout's pctk:
    this Python, else the system's of the same version (this one may sit in a 0700 home);
    and where the checkout or its packages are private (a clone in `mktemp -d`, under /root),
    a world-readable copy of them in ``base``."""
    paths = sysconfig.get_paths()
    here = os.pathsep.join(dict.fromkeys([str(REPO), paths["purelib"], paths["platlib"]]))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for pythonpath in (here, None):
        if pythonpath is None:
            pythonpath = str(_readable_copy(base / "site"))
        for exe in (sys.executable, f"/usr/bin/python{version}"):
            r = subprocess.run([*AS_NOBODY, "env", f"PYTHONPATH={pythonpath}", exe, "-c",
                                "import toolkit.cli"], capture_output=True, timeout=60, cwd="/")
            if r.returncode == 0:
                return exe, pythonpath
    return None


def _readable_copy(site: Path) -> Path:
    """The checkout's toolkit/ and benchmarks/ and the distributions a head-node install of
    pctk needs (its requirements without extras, followed through theirs), copied into
    ``site`` with modes that let any user read them."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    for pkg in ("toolkit", "benchmarks"):
        shutil.copytree(REPO / pkg, site / pkg,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    todo, seen = ["pctk"], set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency this environment lacks
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        if name == "pctk":
            continue  # installed editable: the checkout's own folders, copied above
        for f in dist.files or []:
            src = Path(str(dist.locate_file(f)))
            if f.parts[0] == ".." or not src.is_file():  # scripts in bin/: not needed
                continue
            dst = site / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    for d, _, files in os.walk(site):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return site


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
    base = Path(tempfile.mkdtemp(prefix="pctk-ou-", dir="/tmp"))
    base.chmod(0o755)
    python = _nobody_python(base)
    # neither this Python nor the system's of its version runs for nobody
    assert python is not None, "nobody cannot run a Python with a readable copy of pctk"
    exe, pythonpath = python
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
