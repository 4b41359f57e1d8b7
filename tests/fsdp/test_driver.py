"""``pctk bench fsdp``: the rendered batch script, input errors, and a whole run through
stand-ins for sbatch, srun and sacct (the real Slurm is exercised in test_twin.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fsdp.fsdp_launch import free_port
from toolkit.bench.fsdp import FsdpJob, render_sbatch, summary_rows
from toolkit.cli import app, main

GOLDEN = Path(__file__).parent / "golden"
JOBS = {
    "fsdp-8b-srun.sbatch": FsdpJob(
        nodes=2, model="8b", run_dir=Path("/fsx/runs/fsdp-8b"), partition="gpu",
        ckpt_every=25, time_limit="01:00:00", python="/fsx/venv/bin/python",
        repo=Path("/fsx/pctk"), train_flags=["--compile", "--peak-tflops", "989.0"]),
    "fsdp-tiny-torchrun.sbatch": FsdpJob(
        nodes=4, model="tiny", run_dir=Path("/fsx/runs/tiny"), tasks_per_node=2,
        gpus_per_node=0, launcher="torchrun", steps=10, seq_len=64, requeue=False,
        python="/fsx/venv/bin/python", repo=Path("/fsx/pctk")),
}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_rendered_script_matches_golden_and_shellcheck(name: str, tmp_path: Path) -> None:
    text = render_sbatch(JOBS[name])
    golden = GOLDEN / name
    if os.environ.get("PCTK_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", "-s", "bash", str(golden)], check=True)


def test_static_sbatch_passes_shellcheck() -> None:
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck not installed")
    script = Path(__file__).resolve().parents[2] / "sbatch" / "fsdp.sbatch"
    subprocess.run(["shellcheck", str(script)], check=True)


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "9b"], "unknown model preset '9b'; fix: use one of tiny, small, 1b, 8b, 70b"),
    (["--launcher", "mpirun"], "unknown launcher 'mpirun'"),
    (["--nodes", "0"], "--nodes must be at least 1"),
    (["--run-dir", "/fsx/my runs"], "no whitespace"),
    (["--instance-type", "p9.huge"], "not in the pctk catalog"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "fsdp", "--dry-run", *argv]) == 2
    assert message in capsys.readouterr().err


def test_instance_type_sets_ranks_and_peak() -> None:
    result = CliRunner().invoke(app, ["bench", "fsdp", "--instance-type", "p5.48xlarge",
                                      "--nodes", "2", "--dry-run", "--run-dir", "/x"])
    assert result.exit_code == 0, result.output
    assert "#SBATCH --ntasks-per-node=8" in result.output
    assert "#SBATCH --gpus-per-node=8" in result.output
    assert "--batch-size 16 --seq-len 8192" in result.output
    assert "--peak-tflops 989" in result.output


FAKE_SBATCH = """#!/bin/bash
# stand-in: run the script at once, as job 4242, writing where #SBATCH --output says
script="${@: -1}"
out=$(sed -n 's/^#SBATCH --output=//p' "$script" | sed 's/%j/4242/')
SLURM_JOB_ID=4242 SLURM_JOB_NODELIST=localhost bash "$script" >>"$out" 2>&1 || true
echo "4242;twin"
"""
FAKE_SRUN = """#!/bin/bash
while [[ "$1" == --* ]]; do shift; done
exec "$@"
"""


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("srun", FAKE_SRUN),
                       ("sacct", "#!/bin/bash\necho COMPLETED\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_JOB_ID", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_submit_wait_and_report(fake_slurm: Path) -> None:
    run_dir = fake_slurm / "run"
    argv = ["bench", "fsdp", "--model", "tiny", "--tasks-per-node", "1", "--gpus-per-node",
            "0", "--steps", "5", "--ckpt-every", "5", "--run-dir", str(run_dir), "--json"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, (result.output, (run_dir / "slurm-4242.out").read_text())
    rec = json.loads(result.stdout)
    assert rec["kind"] == "fsdp" and rec["verdict"]["status"] == "PASS"
    assert rec["params"]["world_size"] == 1 and rec["params"]["seq_len"] == 64
    assert len(rec["metrics"]["losses"]) == 5
    assert (run_dir / "fsdp.sbatch").exists() and (run_dir / "ckpt").is_dir()

    table = dict(summary_rows(rec))
    assert table["model"].startswith("tiny") and table["verdict"] == "PASS"
    # again, without --json: resumes from the step-5 checkpoint with no step left to run
    result = CliRunner().invoke(app, argv[:-1])
    assert result.exit_code == 0, result.output
    assert "tokens/s per GPU" in result.stdout and "resumed at step 5" in result.stdout


def test_job_without_record_is_an_error(fake_slurm: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    (fake_slurm / "bin" / "sbatch").write_text("#!/bin/bash\necho 4242\n")  # job does nothing
    run_dir = fake_slurm / "run"
    code = main(["bench", "fsdp", "--model", "tiny", "--tasks-per-node", "1",
                 "--gpus-per-node", "0", "--run-dir", str(run_dir)])
    assert code == 2
    err = capsys.readouterr().err
    assert "ended COMPLETED without a result record" in err and "slurm-4242.out" in err
