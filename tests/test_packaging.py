"""The wheel carries what a head node without a checkout needs: the presets, the batch scripts
and the dashboard, found from the installed package; `pip install pctk` (no extra) installs
no torch, NVML or Grafana SDK, and the CLI works in that install."""

from __future__ import annotations

import json
import os
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
    assert "toolkit/observe/dashboard.json" in names
    # the product, not the development harnesses that sit beside it in the repository
    assert "benchmarks/fsdp/train.py" in names and "benchmarks/faultpoints.py" in names
    # the accelerator table, which a compute node reads for MFU and the roofline
    assert "benchmarks/accelerators.yaml" in names and "toolkit/data/instances.yaml" in names
    harnesses = [n for n in names if n.startswith(("benchmarks/reference/",
                                                    "benchmarks/gpu_check", "benchmarks/gpu_mfu"))]
    assert harnesses == []


def test_installed_package_finds_its_own_copies(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, capture_output=True, timeout=300)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); "
             "from toolkit import paths; from toolkit.health import sweep; "
             "from toolkit.bench.collectives import driver as sweep_job; "
             "print(paths.code_root()); print(paths.sbatch_dir()); "
             "print(paths.preset_path('p5-training')); print(sweep.SWEEP_SCRIPT); "
             "print(sweep_job.SBATCH_SCRIPT); "
             "from benchmarks import hardware; "
             "assert hardware.peak_tflops_for('NVIDIA H100 80GB HBM3') == 989")
    r = subprocess.run([sys.executable, "-c", probe, str(site)], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120, check=True)
    root, sbatch_dir, preset, sweep_script, collectives = map(Path, r.stdout.split())
    assert root == site
    assert sbatch_dir == site / "toolkit" / "_sbatch"
    for path in (preset, sweep_script, collectives):
        assert path.is_file() and path.is_relative_to(site), path


# what a GPU node or a developer has, never a head node (the node and dev extras)
NOT_ON_A_HEAD_NODE = ("torch", "nvidia-ml-py", "grafana-foundation-sdk")


def test_head_node_install_has_no_torch_and_its_cli_works(wheel: Path, tmp_path: Path) -> None:
    """`pip install pctk` into a clean virtual environment, from the indexes pip is configured
    with and the tested versions (constraints.txt), then the head node's commands."""
    venv = tmp_path / "head"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    # this environment's pip installs into the new one; no byte-compiling keeps it short
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                        "--no-compile", "-c", str(REPO / "constraints.txt"), str(wheel)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "list",
                        "--format=json"], capture_output=True, text=True, timeout=120, check=True)
    installed = {d["name"].lower().replace("_", "-") for d in json.loads(r.stdout)}
    assert {"pctk", "submitit", "aws-parallelcluster"} <= installed
    assert not installed & set(NOT_ON_A_HEAD_NODE)
    # nothing of the checkout or of this environment leaks in
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PCTK_HOME"] = str(tmp_path / "state")
    probe = ("import importlib.util as u, toolkit; print(toolkit.__file__); "
             "print([m for m in ('torch', 'pynvml', 'grafana_foundation_sdk') if u.find_spec(m)])")
    r = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120, check=True)
    where, importable = r.stdout.splitlines()
    assert Path(where).is_relative_to(venv) and importable == "[]"
    pctk = str(venv / "bin" / "pctk")

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([pctk, *argv], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)

    checked = run("config", "check", "p5-training")
    assert checked.returncode == 0, checked.stderr
    assert "aws-parallelcluster 3.16" in checked.stdout + checked.stderr
    helped = run("submit", "--help")
    assert helped.returncode == 0 and "Usage: pctk submit" in helped.stdout, helped.stderr
    board = run("observe", "dashboard")
    assert board.returncode == 0, board.stderr
    assert board.stdout == (REPO / "toolkit" / "observe" / "dashboard.json").read_text()
