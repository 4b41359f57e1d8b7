"""benchmarks/gpu_mfu.py without a GPU: argument parsing, the runs it would start, the report."""

from __future__ import annotations

import pytest

from benchmarks import gpu_mfu


def test_dry_run_prints_eager_and_compile_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_mfu.main(["--dry-run"]) == 0
    eager, compiled = capsys.readouterr().out.splitlines()
    for line in (eager, compiled):
        assert "-m benchmarks.fsdp.train --model 1b --device cuda" in line
        assert "--batch-size 2 --seq-len 4096" in line
    assert eager.endswith("--no-compile") and compiled.endswith(" --compile")


def test_options_reach_the_runs() -> None:
    a = gpu_mfu.parse_args(["--variants", "compile", "--ac", "--peak-tflops", "989"])
    cmd = gpu_mfu.command(a, "compile", gpu_mfu.Path("/r.json"))
    assert cmd[-4:] == ["--compile", "--ac", "--peak-tflops", "989.0"]
    assert a.variants == ["compile"]


@pytest.mark.parametrize("argv", [["--target", "40"], ["--steps", "5", "--timing-warmup", "5"],
                                  ["--variants", "jit"]])
def test_bad_arguments_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        gpu_mfu.parse_args(argv)
    assert exc.value.code == 2


def test_without_cuda_it_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert gpu_mfu.main(["--variants", "eager"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_report_judges_against_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    metrics = {"tokens_per_s_per_gpu": 45000.0, "tflops_per_gpu": 405.0, "step_time_p50_s": 0.18,
               "peak_memory_gib": 50.0, "final_loss": 3.2}
    assert gpu_mfu.report({"eager": {**metrics, "mfu": 0.35},
                           "compile": {**metrics, "mfu": 0.41}}, 0.40) is False
    assert gpu_mfu.report({"compile": {**metrics, "mfu": 0.41}}, 0.40) is True
    out = capsys.readouterr().out
    assert "41.0%" in out and "NOT met" in out
