"""``pctk bench scaling`` without running it: the batch script, the batch per size, bad input."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PCTK = str(Path(sys.executable).parent / "pctk")
BASE = ["bench", "scaling", "--model", "tiny", "-p", "cpu", "--tasks-per-node", "2",
        "--gpus-per-node", "0", "--dry-run"]


def pctk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PCTK, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
def test_one_allocation_runs_every_size_on_its_first_nodes(tmp_path: Path, launcher: str) -> None:
    r = pctk(*BASE, "--nodes", "4,1,2", "--launcher", launcher, "--run-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    script = r.stdout
    assert "#SBATCH --nodes=4" in script and "#SBATCH --no-requeue" in script
    assert "set -uo pipefail" in script and "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}" in script
    steps = [line for line in script.splitlines() if line.startswith("srun ")]
    assert len(steps) == 3
    for n, line in zip((1, 2, 4), steps, strict=True):
        assert f"--nodes={n} --nodelist=\"${{nodes_{n}}}\"" in line
        assert f"--out {tmp_path}/nodes-{n}/record.json" in line
        assert line.endswith(f'|| echo "pctk-scaling: {n} node(s) failed (exit $?)"')
        # weak scaling: one sequence per rank at every size
        assert f"--batch-size {n * 2} " in line
    if shutil.which("shellcheck"):
        path = tmp_path / "s.sh"
        path.write_text(script)
        check = subprocess.run(["shellcheck", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout


def test_strong_scaling_keeps_the_global_batch(tmp_path: Path) -> None:
    r = pctk(*BASE, "--nodes", "1,2,4", "--strong", "--batch-per-gpu", "4", "--run-dir",
             str(tmp_path))
    assert r.returncode == 0, r.stderr
    sizes = [line for line in r.stdout.splitlines() if line.startswith("srun ")]
    assert all("--batch-size 8 " in line for line in sizes)  # 4 per GPU x 2 ranks x 1 node


@pytest.mark.parametrize(("args", "message"), [
    (["--nodes", "1,x"], "is not a list of node counts"),
    (["--nodes", "0,2"], "node counts must be at least 1"),
    (["--nodes", "1,2,4", "--strong"], "cannot split evenly"),
    (["--nodes", "1,2", "--model", "huge"], "unknown model preset"),
    # no timed step to predict or diagnose from: refused before any size runs (it printed a
    # NotDiagnosable traceback after all of them)
    (["--nodes", "1,2", "--steps", "3"], "--steps 3 leaves no timed step after the 3 warm-up"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    r = pctk(*BASE, *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr
