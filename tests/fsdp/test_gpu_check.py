"""benchmarks/gpu_check.py without a GPU: its arguments, the steps it would run, the comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import gpu_check

# two rows of a real all_reduce_perf run on one GPU (nccl-tests issue 287; spacing narrowed)
PERF_LINES = """\
  67108864 16777216 float sum -1  85.69 783.15 0.00 0  0.08  818400.78 0.00 0
 134217728 33554432 float sum -1  175.6 764.34 0.00 0  0.08 1777718.25 0.00 0
# Avg bus bandwidth    : 0
"""


@pytest.fixture(autouse=True)
def no_nccl_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NCCL_TESTS_SRC", "NCCL_TESTS_BIN", "OUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def test_dry_run_lists_every_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_check.main(["--dry-run", "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    for step in ("[env,", "[health,", "[fsdp,", "[plain,", "[fp8,", "[sweep,"):
        assert step in out
    # the FSDP run leaves sequence length, batch and compile to the GPU defaults
    fsdp = next(x for x in out.splitlines() if x.startswith("[fsdp,"))
    assert fsdp.endswith(" -m benchmarks.fsdp.train --model 1b --steps 15 --timing-warmup 5 "
                         "--log-every 5 --out " + str(Path("gpu-check/fsdp.json").resolve()))
    # the peers take the shape and the tokens per step of that run's record
    assert f"-m benchmarks.reference.plain_loop --like {Path('gpu-check/fsdp.json').resolve()}" \
        in out
    assert "--fp8 --out" in out
    assert "[torchtitan] skipped: " in out
    assert "--nproc-per-node=2 -m benchmarks.collectives --backend nccl" in out
    assert "--cuda-graph off" in out  # the eager all_reduce run, for the launch cost
    assert "[nccl_tests] skipped: set NCCL_TESTS_SRC" in out
    # the single-GPU breakdown of the 1b shape, then the check that its parts add up
    assert "[breakdown," in out
    assert "--nproc-per-node=1 -m benchmarks.fsdp.train --model 1b --device cuda" in out
    assert "-m benchmarks.fsdp.breakdown " in out and "--tolerance 0.05" in out
    # the 1b decode at batch 1 and 32, judged against the HBM roofline
    assert "-m benchmarks.inference.bench run --model 1b --prompt-lens 512,2048 " \
           "--batch-sizes 1,32 --context 512 --decode-tokens 64 --device cuda" in out
    assert "-m benchmarks.inference.bench merge --parts " in out
    assert "--device cuda --cuda-graph --parts " in out
    assert "-m benchmarks.reference.generate_peer --model 1b --batch-sizes 1,32" in out


def test_nccl_tests_runs_like_the_sweep_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NCCL_TESTS_BIN", str(tmp_path))
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    a = gpu_check.parse_args(["--steps", "nccl_tests", "--gpus", "4"])
    assert a.out_dir == tmp_path / "out" / "gpu_check"
    (step,) = gpu_check.plan(a, 4)
    plain, graphed = step.commands
    assert plain[0] == str(tmp_path / "all_reduce_perf")
    assert " ".join(plain).endswith("-g 4 -n 20 -w 5 -a 1 -c 1 -G 0")  # -a 1: mean over ranks
    assert graphed[-2:] == ["-G", "1"]


@pytest.mark.parametrize("argv", [["--steps", "fsdp,bogus"], ["--fsdp-warmup", "15"],
                                  ["--max-bytes", "lots"], ["--gpus", "-1"]])
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        gpu_check.parse_args(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_comparison_reads_both_tools_per_size(tmp_path: Path) -> None:
    rows = gpu_check.perf_rows(PERF_LINES)
    assert rows[134217728]["out_of_place"] == {"time_us": 175.6, "algbw_gbps": 764.34,
                                               "busbw_gbps": 0.0}
    assert rows[67108864]["in_place"]["time_us"] == 0.08
    (tmp_path / "nccl_tests.log").write_text(
        f"$ /b/all_reduce_perf -g 1 -a 1 -G 0\n{PERF_LINES}")
    sweep_row = {"size_bytes": 134217728, "in_place": {"time_us": 12.0, "algbw_gbps": 11185.0,
                                                       "busbw_gbps": 0.0}}
    record = {"metrics": {"collectives": [{"collective": "all_reduce", "rows": [sweep_row]}]}}
    (tmp_path / "sweep-graph.json").write_text(json.dumps(record))
    lines = gpu_check.compare(tmp_path, gpus=1)
    assert any("moves no data" in line for line in lines)
    (row,) = [line for line in lines if line.strip().startswith("134217728")]
    assert row.split()[1] == "12.0" and row.split()[3] == "0.1" and row.split()[5] == "175.6"


def _record(path: Path, tokens_s: float, mem: float, mfu: float | None, dtype: str = "bfloat16",
            **params: object) -> None:
    path.write_text(json.dumps({
        "params": {"seq_len": 4096, "local_batch_size": 4, "compile": True,
                   "activation_checkpointing": False, **params},
        "metrics": {"tokens_per_s_per_gpu": tokens_s, "tflops_per_gpu": 500.0, "mfu": mfu,
                    "peak_memory_gib": mem, "mfu_dtype": dtype, "peak_tflops": 989.0}}))


def test_training_table_sets_the_runs_side_by_side(tmp_path: Path) -> None:
    _record(tmp_path / "fsdp.json", 55_000.0, 50.0, 0.52,
            defaults={"gpu": "NVIDIA H200 140 GiB", "chosen": ["seq_len", "batch_per_gpu"]})
    _record(tmp_path / "plain.json", 50_000.0, 48.0, 0.47)
    _record(tmp_path / "fp8.json", 71_500.0, 45.0, 0.34, "float8")
    lines, ratios = gpu_check.training_table(tmp_path)
    assert ratios["pctk_vs_plain_tokens"] == pytest.approx(1.1)
    assert ratios["pctk_vs_plain_memory"] == pytest.approx(50 / 48)
    assert ratios["fp8_vs_bf16_tokens"] == pytest.approx(1.3)
    assert ratios["pctk_vs_torchtitan_tokens"] is None
    text = "\n".join(lines)
    assert "MFU: 52.0% (target >= 50.0%: met)" in text
    assert "pctk/plain tokens/s: 1.100 (target >= 1.100: met)" in text
    assert "pctk/plain peak memory: 1.042 (target <= 1.050: met)" in text
    assert "pctk/torchtitan tokens/s: not measured" in text
    (fp8_row,) = [x for x in lines if x.startswith("fp8 ")]
    assert "fp8 989" in fp8_row and "1.430" in fp8_row  # its peak named; vs the plain loop
    assert "pctk NVIDIA H200 140 GiB: chosen seq_len, batch_per_gpu" in text
    _record(tmp_path / "plain.json", 60_000.0, 40.0, 0.55)
    text = "\n".join(gpu_check.training_table(tmp_path)[0])
    assert "pctk/plain tokens/s: 0.917 (target >= 1.100: NOT met)" in text
    assert "pctk/plain peak memory: 1.250 (target <= 1.050: NOT met)" in text


def test_the_training_steps_run_on_a_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The fsdp, plain and fp8 steps end to end with the tiny shape on the CPU: records that
    pctk results add takes, one table, fp8 refused in one line and reported as such."""
    pytest.importorskip("transformers", reason="the plain-loop peer needs transformers")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rc = gpu_check.main(["--steps", "fsdp,plain,fp8", "--model", "tiny", "--fsdp-steps", "3",
                         "--fsdp-warmup", "1", "--out-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "fp8" in out and "refused: see fp8.log" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["ok"] for s in summary["steps"]] == [True, True, True]
    assert "sm89" in (tmp_path / "fp8.log").read_text()
    assert summary["ratios"]["pctk_vs_plain_tokens"] > 0
    assert summary["records"] == [str(tmp_path / "fsdp.json"), str(tmp_path / "plain.json")]
    assert "store the records: pctk results add" in out
    plain = json.loads((tmp_path / "plain.json").read_text())["params"]
    assert (plain["model"], plain["seq_len"], plain["local_batch_size"]) == ("tiny", 64, 8)
