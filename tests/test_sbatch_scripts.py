"""The plain scripts in sbatch/: shellcheck-clean, and the CPU-capable ones run unmodified on
the twin, submitted by hand with `sbatch` as a researcher would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.twinutil import STALE_LAUNCHER

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "sbatch").iterdir())


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_clean(script):
    r = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def _env(twin) -> dict[str, str]:
    return {**twin.env, **STALE_LAUNCHER, "PCTK_PYTHON": sys.executable, "PCTK_REPO": str(REPO)}


@pytest.mark.parametrize("name", ["collectives.sbatch", "fsdp.sbatch", "inference.sbatch"])
def test_srun_rank_scripts_unset_the_launcher_variables_before_srun(name):
    from benchmarks.distenv import LAUNCHER_VARIABLES

    assert set(STALE_LAUNCHER) == set(LAUNCHER_VARIABLES)
    lines = (REPO / "sbatch" / name).read_text().splitlines()
    unset = next(i for i, x in enumerate(lines) if x.startswith("unset "))
    srun = next(i for i, x in enumerate(lines) if x.startswith("srun "))
    assert lines[unset].split()[1:] == list(LAUNCHER_VARIABLES) and unset < srun


def _sbatch(twin, *argv: str) -> str:
    r = subprocess.run(["sbatch", "--parsable", *argv], capture_output=True, text=True,
                       env=_env(twin), cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(";")[0]


@pytest.mark.twin
def test_fsdp_sbatch_runs_on_cpu_nodes(twin, tmp_path):
    job = _sbatch(twin, "--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=0",
                  "--partition=cpu", f"--output={tmp_path}/fsdp-%j.out",
                  f"--export=ALL,PCTK_RUN_DIR={tmp_path}/run",
                  str(REPO / "sbatch" / "fsdp.sbatch"),
                  "--model", "tiny", "--steps", "4", "--seq-len", "32", "--batch-size", "2",
                  "--ckpt-every", "2", "--device", "cpu")
    assert twin.wait(job, timeout=300) == "COMPLETED", (tmp_path / f"fsdp-{job}.out").read_text()
    rec = json.loads((tmp_path / "run" / "record.json").read_text())
    assert rec["kind"] == "fsdp" and rec["params"]["world_size"] == 2
    assert (tmp_path / "run" / "ckpt").is_dir()


@pytest.mark.twin
def test_collectives_sbatch_runs_on_cpu_nodes(twin, tmp_path):
    out = tmp_path / "coll.json"
    job = _sbatch(twin, "--nodes=2", "--partition=cpu", f"--output={tmp_path}/c-%j.out",
                  str(REPO / "sbatch" / "collectives.sbatch"),
                  "--ops", "all_reduce,broadcast", "--min-bytes", "1K", "--max-bytes", "64K",
                  "--iters", "3", "--warmup", "1", "--out", str(out))
    assert twin.wait(job, timeout=300) == "COMPLETED", (tmp_path / f"c-{job}.out").read_text()
    rec = json.loads(out.read_text())
    assert rec["kind"] == "collectives"


@pytest.mark.twin
def test_health_sweep_sbatch_runs_on_every_node(twin, tmp_path):
    (tmp_path / "fsx").mkdir()
    job = _sbatch(twin, "--nodes=2", "--partition=cpu", f"--output={tmp_path}/h-%j.out",
                  f"--export=ALL,PYTHONPATH={REPO}",
                  str(REPO / "sbatch" / "health-sweep.sbatch"), "--level", "quick",
                  "--mount", str(tmp_path / "fsx"), "--out-dir", str(tmp_path / "reports"))
    assert twin.wait(job, timeout=300) in ("COMPLETED", "FAILED")
    reports = sorted(p.stem for p in (tmp_path / "reports").glob("*.json"))
    assert reports == ["cpu-dy-c5-1", "cpu-dy-c5-2"]


@pytest.mark.twin
def test_inference_sbatch_runs_on_cpu_nodes(twin, tmp_path):
    job = _sbatch(twin, "--nodes=2", "--gpus-per-node=0", "--partition=cpu",
                  f"--output={tmp_path}/i-%j.out",
                  f"--export=ALL,PCTK_RUN_DIR={tmp_path}/run,PCTK_PRICE_USD_PER_HOUR=0.68",
                  str(REPO / "sbatch" / "inference.sbatch"),
                  "--model", "tiny", "--prompt-lens", "16", "--batch-sizes", "1,2",
                  "--context", "16", "--decode-tokens", "4", "--samples", "2",
                  "--output-len", "8")
    assert twin.wait(job, timeout=300) == "COMPLETED", (tmp_path / f"i-{job}.out").read_text()
    rec = json.loads((tmp_path / "run" / "record.json").read_text())
    assert rec["kind"] == "inference" and rec["params"]["nodes_measured"] == 2
    assert [r["batch"] for r in rec["metrics"]["decode"]] == [1, 2]
    assert rec["metrics"]["test_time"]["usd_per_million_output_tokens"] > 0


@pytest.mark.twin
def test_serve_sbatch_serves_on_cpu_nodes_until_cancelled(twin, tmp_path):
    """transformers' server from serve.sbatch, the load generator from another node."""
    import time

    run = tmp_path / "run"
    server = _sbatch(twin, "--gpus-per-node=0", "--partition=cpu",
                     f"--output={tmp_path}/s-%j.out",
                     f"--export=ALL,PCTK_RUN_DIR={run},PCTK_MODEL=tiny,OMP_NUM_THREADS=1",
                     str(REPO / "sbatch" / "serve.sbatch"))
    try:
        deadline = time.monotonic() + 150
        while not (run / "server.json").is_file():
            log = tmp_path / f"s-{server}.out"
            assert time.monotonic() < deadline and twin.state(server) in (
                "UNKNOWN", "PENDING", "CONFIGURING", "RUNNING"), log.read_text()
            time.sleep(0.5)
        node = twin.cmd("squeue", "-h", "-j", server, "-o", "%N").stdout.strip()
        load = _sbatch(twin, "--partition=cpu", f"--exclude={node}",
                       f"--output={tmp_path}/l-%j.out", "--wrap",
                       f"{sys.executable} -m benchmarks.serving.load --endpoint-file "
                       f"{run}/server.json --concurrencies 1 --requests 2 --prompt-tokens 8 "
                       f"--output-tokens 4 --out {run}/record.json")
        assert twin.wait(load, timeout=120) == "COMPLETED", (
            tmp_path / f"l-{load}.out").read_text()
        rec = json.loads((run / "record.json").read_text())
        assert rec["kind"] == "serving" and rec["verdict"]["status"] == "PASS"
        assert rec["params"]["backend"] == "transformers"
        assert rec["params"]["server_host"] != rec["params"]["load_host"]
        assert rec["metrics"]["levels"][0]["mean_output_tokens"] == 4
        assert twin.state(server) == "RUNNING"  # serves until cancelled
    finally:
        twin.cmd("scancel", server, check=False)
    assert twin.wait(server, timeout=90) == "CANCELLED"
