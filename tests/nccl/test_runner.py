"""The runner's subprocess plumbing, driven through a STAND-IN all_reduce_perf.

tests/nccl/standin/all_reduce_perf measures nothing: it replays a recorded real log and
records how it was started, so these tests check arguments, environment, exit codes, a
crash mid-run and timeouts, never bandwidth.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.record import read_record
from tests.nccl import FIXTURES
from toolkit.bench.nccl.parse import parse_nccl_output
from toolkit.bench.nccl.runner import (
    EFA_ENV,
    LaunchSpec,
    build_command,
    find_binary,
    launch_env,
    run_logged,
)
from toolkit.errors import PctkError

STANDIN_DIR = Path(__file__).resolve().parent / "standin"
FIXTURE = FIXTURES / "09_nccl-tests-287-allreduce-1gpu-5090-avg0.log"
REPO = Path(__file__).resolve().parents[2]


def test_missing_binary_says_where_it_looked_and_how_to_build(tmp_path: Path) -> None:
    with pytest.raises(PctkError) as err:
        find_binary("all_gather", str(tmp_path))
    line = err.value.one_line()
    assert str(tmp_path / "all_gather_perf") in line
    assert "sbatch/nccl-tests-build.sbatch" in line and "\n" not in line


def test_srun_and_mpirun_commands_are_argument_lists() -> None:
    binary = Path("/opt/nccl-tests/build/all_reduce_perf")
    spec = LaunchSpec("all_reduce", nodes=2, gpus_per_node=8, partition="gpu",
                      max_bytes="16G", iters=50)
    assert build_command(spec, binary) == [
        "srun", "--nodes=2", "--ntasks-per-node=8", "--mpi=pmix", "--export=ALL",
        "--partition=gpu", str(binary), "-b", "8", "-e", "16G", "-f", "2", "-g", "1",
        "-n", "50", "-w", "5", "-c", "1"]
    mpi = build_command(LaunchSpec("all_reduce", nodes=2, launcher="mpirun"), binary)
    assert mpi[:5] == ["mpirun", "-np", "16", "--map-by", "ppr:8:node"]
    assert "-x" in mpi and "FI_PROVIDER" in mpi and mpi.index(str(binary)) > mpi.index("-x")
    single = build_command(LaunchSpec("all_reduce", gpus_per_node=4, launcher="none"), binary)
    assert single[0] == str(binary) and single[single.index("-g") + 1] == "4"


def test_efa_environment_is_set_and_overridable() -> None:
    env = launch_env(LaunchSpec("all_reduce", extra_env={"NCCL_DEBUG": "WARN"}), {"A": "1"})
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_HUGE_PAGE"] == "0"
    assert env["NCCL_DEBUG"] == "WARN" and env["A"] == "1"
    assert set(EFA_ENV) <= set(env)


def _standin_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    spec = LaunchSpec("all_reduce", launcher="none", gpus_per_node=1)
    env = launch_env(spec)
    env.update(STANDIN_FIXTURE=str(FIXTURE), STANDIN_RECORD=str(tmp_path / "started.json"),
               **extra)
    return env


def test_runner_passes_arguments_and_environment(tmp_path: Path) -> None:
    spec = LaunchSpec("all_reduce", launcher="none", gpus_per_node=1, max_bytes="128M")
    cmd = build_command(spec, find_binary("all_reduce", str(STANDIN_DIR)))
    out = run_logged(cmd, _standin_env(tmp_path), tmp_path / "all_reduce.log", timeout=60)
    assert out.returncode == 0 and not out.timed_out
    started = json.loads((tmp_path / "started.json").read_text())
    assert started["argv"][1:] == cmd[1:]
    assert started["env"]["FI_PROVIDER"] == "efa" and started["env"]["NCCL_DEBUG"] == "INFO"
    assert (tmp_path / "all_reduce.log").read_text() == FIXTURE.read_text()


def test_crash_mid_run_keeps_rows_and_failure(tmp_path: Path) -> None:
    cmd = [str(STANDIN_DIR / "all_reduce_perf")]
    log = tmp_path / "crash.log"
    out = run_logged(cmd, _standin_env(tmp_path, STANDIN_CRASH_AFTER="7"), log, timeout=60)
    assert out.returncode == 134
    (run,) = parse_nccl_output(log.read_text(), collective="all_reduce")
    assert not run.complete and len(run.rows) == 7
    assert any("Test NCCL failure" in ln for ln in run.failure_lines)
    assert any("exited with status 134" in ln for ln in run.failure_lines)


def test_hung_run_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    cmd = [str(STANDIN_DIR / "all_reduce_perf")]
    out = run_logged(cmd, _standin_env(tmp_path, STANDIN_SLEEP="60"), tmp_path / "hang.log",
                     timeout=1.5)
    assert out.timed_out and out.seconds < 30
    assert "timed out after 1.5 s" in (tmp_path / "hang.log").read_text()


def _pctk(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = "import sys; from toolkit.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)


def test_pctk_bench_nccl_run_writes_record_and_log(tmp_path: Path) -> None:
    env = _standin_env(tmp_path)
    res = _pctk("bench", "nccl", "run", "--launcher", "none", "--gpus-per-node", "1",
                "--nccl-tests-dir", str(STANDIN_DIR), "--out", str(tmp_path / "out"),
                "--json", env=env)
    assert res.returncode == 0, res.stderr
    rec = read_record(tmp_path / "out" / "record.json")
    assert json.loads(res.stdout)["id"] == rec["id"]
    assert rec["kind"] == "nccl-tests" and rec["raw_logs"] == ["all_reduce.log"]
    (block,) = rec["metrics"]["collectives"]
    assert block["collective"] == "all_reduce" and len(block["rows"]) == 25
    assert rec["params"]["commands"][0][1:3] == ["-b", "8"]

    res = _pctk("bench", "nccl", "run", "--launcher", "none", "--nccl-tests-dir",
                str(STANDIN_DIR), "--out", str(tmp_path / "crash"), "--json",
                env=_standin_env(tmp_path, STANDIN_CRASH_AFTER="3"))
    assert res.returncode == 1
    assert json.loads(res.stdout)["verdict"]["status"] == "FAIL"

    res = _pctk("bench", "nccl", "run", "--launcher", "none", "--nccl-tests-dir",
                str(tmp_path), "--out", str(tmp_path / "none"), env=env)
    assert res.returncode == 2 and "nccl-tests-build.sbatch" in res.stderr


def test_pctk_bench_nccl_parse_compare_plot_exit_codes(tmp_path: Path) -> None:
    ok = str(FIXTURES / "13_nccl-tests-331-sendrecv-a100-nthread2-info.log")
    bad = str(FIXTURES / "14_nccl-tests-37-allgather-v100-oldest-format-failed.log")
    res = _pctk("bench", "nccl", "parse", ok, "--out", str(tmp_path / "r.json"), "--csv",
                str(tmp_path / "r.csv"), "--plot", str(tmp_path / "r.png"), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"]["status"] == "PASS"
    assert (tmp_path / "r.png").stat().st_size > 1000
    assert _pctk("bench", "nccl", "parse", bad).returncode == 1
    assert _pctk("bench", "nccl", "parse", str(tmp_path / "nope.log")).returncode == 2
    same = _pctk("bench", "nccl", "compare", str(tmp_path / "r.json"), ok, "--json")
    assert same.returncode == 0 and json.loads(same.stdout)["regression"] is False
    slower = tmp_path / "sendrecv-slower.log"
    slower.write_text(Path(ok).read_text().replace("  71.74   71.74", "  41.74   41.74"))
    worse = _pctk("bench", "nccl", "compare", ok, str(slower))
    assert worse.returncode == 1 and "REGRESSION" in worse.stdout
    plot = _pctk("bench", "nccl", "plot", ok, str(tmp_path / "r.json"), "--out",
                 str(tmp_path / "two.png"), "--json")
    assert plot.returncode == 0 and json.loads(plot.stdout)["runs"] == 2
