"""``pctk bench fsdp``: the rendered batch script, input errors, and whole runs on the twin
(submit, wait, read the record, resume; a job that dies without a record)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.faultpoints import FAULT_ENV
from tests.twinutil import STALE_LAUNCHER
from toolkit.bench.fsdp.driver import FsdpJob, render_sbatch, summary_rows
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


def golden_files() -> dict[Path, str]:
    """What tests/regen_golden.py writes: each golden file and its rendering now."""
    return {GOLDEN / name: render_sbatch(job) for name, job in JOBS.items()}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_rendered_script_matches_golden_and_shellcheck(name: str, tmp_path: Path) -> None:
    golden = GOLDEN / name
    assert render_sbatch(JOBS[name]) == golden.read_text()
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
    # batch and sequence length are the node's GPU defaults (tests/fsdp/test_defaults.py)
    assert "--batch-size" not in result.output and "--seq-len" not in result.output
    assert "--peak-tflops 989" in result.output


@pytest.mark.twin
def test_submit_wait_and_report_on_the_twin(twin, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for k, v in STALE_LAUNCHER.items():  # the rank is this job's, not the shell's rank 1 of 8
        monkeypatch.setenv(k, v)
    run_dir = tmp_path / "run"
    argv = ["bench", "fsdp", "--model", "tiny", "--partition", "cpu", "--nodes", "1",
            "--tasks-per-node", "1", "--gpus-per-node", "0", "--steps", "5", "--ckpt-every", "5",
            "--run-dir", str(run_dir), "--json"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    rec = json.loads(result.stdout)
    assert rec["kind"] == "fsdp" and rec["verdict"]["status"] == "PASS"
    assert rec["params"]["world_size"] == 1 and rec["params"]["seq_len"] == 64
    assert rec["cluster"]["partition"] == "cpu"
    assert len(rec["metrics"]["losses"]) == 5
    assert (run_dir / "fsdp.sbatch").exists() and (run_dir / "ckpt").is_dir()

    table = dict(summary_rows(rec))
    assert table["model"].startswith("tiny") and table["verdict"] == "PASS"
    # again, without --json: resumes from the step-5 checkpoint with no step left to run
    result = CliRunner().invoke(app, argv[:-1])
    assert result.exit_code == 0, result.output
    assert "tokens/s per GPU" in result.stdout and "resumed at step 5" in result.stdout


@pytest.mark.twin
def test_defaults_fit_nodes_without_gpus(twin, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`bench fsdp -p cpu` with nothing else once started 8 ranks a node of the 8b model on
    nodes without GPUs (killed for memory after minutes). The partition's nodes decide: the
    tiny model, one rank a node, no GRES; a model that cannot fit is refused, with the
    numbers, before anything is submitted."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    run_dir = tmp_path / "run"
    argv = ["bench", "fsdp", "--partition", "cpu", "--nodes", "1", "--steps", "5",
            "--ckpt-every", "0", "--run-dir", str(run_dir), "--json"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    rec = json.loads(result.stdout)
    assert rec["verdict"]["status"] == "PASS", rec["verdict"]
    assert rec["params"]["model"] == "tiny" and rec["params"]["world_size"] == 1
    script = (run_dir / "fsdp.sbatch").read_text()
    assert "--ntasks-per-node=1" in script and "--gpus-per-node" not in script
    assert "# CPU nodes (partition cpu:" in script

    big = tmp_path / "big"
    code = main(["bench", "fsdp", "--partition", "cpu", "--nodes", "2", "--model", "8b",
                 "--run-dir", str(big)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model 8b needs about" in err, err
    assert "GiB per rank" in err and "partition cpu:" in err, err
    assert not (big / "fsdp.sbatch").exists()  # refused before a script or a job


@pytest.mark.twin
def test_a_refused_job_is_told_what_its_partition_has(twin, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """8 ranks a node on 2-CPU nodes: Slurm refuses it ("Requested node configuration is not
    available", "More processors requested than permitted"); the hint names what the
    partition's nodes have, not only `sinfo`."""
    code = main(["bench", "fsdp", "--partition", "cpu", "--nodes", "2", "--model", "tiny",
                 "--tasks-per-node", "8", "--gpus-per-node", "0", "--run-dir",
                 str(tmp_path / "run")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "sbatch refused the job" in err, err
    import re

    assert re.search(r"\(cpu has \d+ node\(s\) of \d+ CPUs, [\d.]+ GiB and no GPU\)$", err), err


@pytest.mark.twin
def test_job_that_dies_without_a_record_is_an_error(twin, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # sbatch exports it: the job exits hard at step 2
    monkeypatch.setenv(FAULT_ENV, "fsdp-crash-at-step=2")
    run_dir = tmp_path / "run"
    code = main(["bench", "fsdp", "--model", "tiny", "--partition", "cpu", "--nodes", "1",
                 "--tasks-per-node", "1", "--gpus-per-node", "0", "--steps", "5",
                 "--run-dir", str(run_dir)])
    assert code == 2
    err = capsys.readouterr().err
    assert "ended FAILED without a result record" in err and "slurm-" in err


def test_summary_shows_both_memory_peaks_and_a_non_bf16_mfu_label() -> None:
    from tests.results.records import fsdp_record

    rec = fsdp_record()
    rec["params"].update(n_params=8_030_261_248, nodes=2, mesh={"shape": [16]},
                         global_batch_size=16, seq_len=8192, param_dtype="float32",
                         compile=False, activation_checkpointing=False, hsdp=False)
    rec["metrics"].update(peak_memory_reserved_gib=70.5, mfu_dtype="float32")
    table = dict(summary_rows(rec))
    assert table["peak memory"].startswith("61.20 GiB allocated, 70.50 GiB reserved")
    assert table["MFU"] == "34.0% (float32 peak)"
    rec["metrics"]["mfu_dtype"] = "bfloat16"
    assert dict(summary_rows(rec))["MFU"] == "34.0%"
    rec["metrics"]["mfu_dtype"] = "float8"
    assert dict(summary_rows(rec))["MFU"] == (
        "34.0% (every FLOP against the float8 dense peak; attention and the output head run "
        "in bf16, so a mixed peak would give more)")


def test_summary_of_a_cpu_run_names_no_reserved_memory() -> None:
    """A CPU run has no allocator reserve: it printed "- GiB reserved (process_max_rss ...)"."""
    from tests.results.records import fsdp_record

    rec = fsdp_record()
    rec["params"].update(n_params=1_000_000, nodes=1, mesh={"shape": [1]},
                         global_batch_size=1, seq_len=64, param_dtype="float32",
                         compile=False, activation_checkpointing=False, hsdp=False)
    rec["metrics"].update(peak_memory_gib=1.25, peak_memory_reserved_gib=None,
                          peak_memory_kind="process_max_rss (whole process: cannot be reset)")
    line = dict(summary_rows(rec))["peak memory"]
    assert line == "1.25 GiB allocated (process_max_rss (whole process: cannot be reset))"
