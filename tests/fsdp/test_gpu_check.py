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
    for step in ("[env,", "[health,", "[fsdp,", "[sweep,"):
        assert step in out
    assert "-m benchmarks.gpu_mfu --steps 15 --timing-warmup 5" in out
    assert "--nproc-per-node=2 -m benchmarks.collectives --backend nccl" in out
    assert "--cuda-graph off" in out  # the eager all_reduce run, for the launch cost
    assert "[nccl_tests] skipped: set NCCL_TESTS_SRC" in out
    # the single-GPU breakdown of the 1b shape, then the check that its parts add up
    assert "[breakdown," in out
    assert "--nproc-per-node=1 -m benchmarks.fsdp.train --model 1b --device cuda" in out
    assert "-m benchmarks.fsdp.breakdown " in out and "--tolerance 0.05" in out


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
