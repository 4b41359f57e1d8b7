"""The sbatch scripts are plain bash that shellcheck accepts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SBATCH = Path(__file__).resolve().parents[2] / "sbatch"
SCRIPTS = ("nccl-tests-build.sbatch", "nccl-tests.sbatch", "collectives.sbatch")


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("name", SCRIPTS)
def test_shellcheck_clean(name: str) -> None:
    res = subprocess.run(["shellcheck", "--shell=bash", str(SBATCH / name)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout


def test_run_script_uses_the_efa_environment_of_the_runner() -> None:
    from toolkit.bench.nccl.runner import EFA_ENV

    text = (SBATCH / "nccl-tests.sbatch").read_text()
    for key, value in EFA_ENV.items():
        assert f"export {key}={value}" in text
