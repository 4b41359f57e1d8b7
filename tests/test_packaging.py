"""The wheel carries what a head node without a checkout needs: the presets and the batch
scripts, found by toolkit.paths from the installed package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytest.importorskip("hatchling", reason="building the wheel needs hatchling (the dev extra)")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    return next(out.glob("pctk-*.whl"))


def test_wheel_holds_the_presets_and_batch_scripts(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for script in (REPO / "sbatch").iterdir():
        assert f"toolkit/_sbatch/{script.name}" in names
    for preset in (REPO / "cluster-configs").glob("*.yaml"):
        assert f"toolkit/_presets/{preset.name}" in names


def test_installed_package_finds_its_own_copies(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, capture_output=True, timeout=300)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); "
             "from toolkit import paths; from toolkit.health import sweep; "
             "from toolkit.bench.collectives import driver as sweep_job; "
             "print(paths.code_root()); print(paths.sbatch_dir()); "
             "print(paths.preset_path('p5-training')); print(sweep.SWEEP_SCRIPT); "
             "print(sweep_job.SBATCH_SCRIPT)")
    r = subprocess.run([sys.executable, "-c", probe, str(site)], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120, check=True)
    root, sbatch_dir, preset, sweep_script, collectives = map(Path, r.stdout.split())
    assert root == site
    assert sbatch_dir == site / "toolkit" / "_sbatch"
    for path in (preset, sweep_script, collectives):
        assert path.is_file() and path.is_relative_to(site), path
