"""``pctk bench inference``: the rendered batch script, input errors, and whole runs on the
twin (two nodes measured, the record merged and stored, Ctrl-C naming the job)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.faultpoints import FAULT_ENV
from tests.twinutil import STALE_LAUNCHER
from toolkit.bench.inference.driver import summary_rows
from toolkit.cli import app, main
from toolkit.results.report import render_report
from toolkit.results.store import ResultStore

PCTK = str(Path(sys.executable).parent / "pctk")
TWIN_ARGS = ["--model", "tiny", "--partition", "cpu", "--gpus-per-node", "0",
             "--decode-tokens", "8"]


def test_instance_type_gives_roofline_figures_gpus_and_price(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "inference", "--instance-type", "p5.48xlarge",
                                      "--samples", "8", "--cuda-graph", "--dry-run",
                                      "--run-dir", "/x"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "#SBATCH --gpus-per-node=1" in out and "#SBATCH --nodes=1" in out
    assert "--model 1b --prompt-lens 128,512,2048 --batch-sizes 1,8,32,64" in out
    assert "--mem-bw-tbps 3.35 --peak-tflops 989.0" in out and " --cuda-graph " in out
    assert "merge --parts /x/parts --out /x/record.json --gpus-per-node 8 " \
           "--price-usd-per-hour 55.04" in out
    script = tmp_path / "inference.sbatch"
    script.write_text(out)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", "-s", "bash", str(script)], check=True)


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "9b"], "unknown model preset '9b'"),
    (["--mode", "batch"], "--mode 'batch' is not available"),
    (["--batch-sizes", "1,x"], "--batch-sizes '1,x' is not a comma-separated list"),
    (["--prompt-lens", "0"], "--prompt-lens '0' needs positive integers"),
    (["--model", "tiny", "--prompt-lens", "4096"], "4096 tokens exceed the tiny shape's"),
    (["--run-dir", "/fsx/my runs"], "no whitespace"),
    (["--instance-type", "p9.huge"], "not in the pctk catalog"),
    (["--cuda-graph", "--gpus-per-node", "0"], "--cuda-graph needs a GPU"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "inference", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.twin
def test_no_model_named_is_tiny_on_cpu_nodes_and_1b_on_gpu_nodes(
        twin, capsys: pytest.CaptureFixture[str]) -> None:
    """`pctk bench inference --partition cpu` on a config of a user's own measured 1b on the
    twin's CPU nodes: prefill of 512 tokens took 18 s, the run many minutes. The shape left
    out follows the partition's nodes, as `bench fsdp`'s does."""
    assert main(["bench", "inference", "--dry-run", "--partition", "cpu", "--run-dir", "/x"]) == 0
    assert "--model tiny --prompt-lens 32,128 " in capsys.readouterr().out
    assert main(["bench", "inference", "--dry-run", "--partition", "gpu", "--run-dir", "/x"]) == 0
    assert "--model 1b --prompt-lens 128,512,2048 " in capsys.readouterr().out


@pytest.mark.twin
def test_two_nodes_measured_merged_and_stored(twin, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for k, v in STALE_LAUNCHER.items():  # ranks are this job's, not the shell's rank 1 of 8
        monkeypatch.setenv(k, v)
    db = tmp_path / "results.db"
    argv = ["bench", "inference", *TWIN_ARGS, "--nodes", "2", "--samples", "3",
            "--output-len", "16", "--instance-type", "c5.4xlarge", "--run-dir",
            str(tmp_path / "run"), "--db", str(db), "--timeout", "240", "--json"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    rec = json.loads(result.stdout)
    assert rec["kind"] == "inference" and rec["verdict"]["status"] == "PASS"
    assert rec["params"]["nodes_measured"] == 2 and rec["params"]["device"] == "cpu"
    assert len(set(rec["cluster"]["hosts"])) == 2 and rec["cluster"]["twin"] is True
    m = rec["metrics"]
    assert [r["prompt_len"] for r in m["prefill"]] == [32, 128]
    assert [r["batch"] for r in m["decode"]] == [1, 4]
    for row in m["decode"]:
        assert row["tokens_per_s"] == pytest.approx(row["batch"] * row["tokens_per_s_per_seq"])
        # K and V x 2 layers x batch x 2 kv heads x (64 + 2 + 8 tokens) x 16 x 4 bytes
        assert row["kv_cache_bytes"] == 2 * 2 * row["batch"] * 2 * 74 * 16 * 4
    assert not m["roofline"]["judged"] and "no roofline is judged" in m["roofline"]["reason"]
    tt = m["test_time"]
    assert tt["output_tokens"] == 48 and tt["price_usd_per_hour"] == pytest.approx(0.68)
    assert tt["usd_per_million_output_tokens"] == pytest.approx(
        0.68 / 3600 / tt["tokens_per_s_per_node"] * 1e6)
    assert tt["tokens_per_s_all_nodes"] == pytest.approx(2 * tt["tokens_per_s_per_node"])
    assert any(name.startswith("slurm-") for name in rec["raw_logs"])
    rows = dict(summary_rows(rec))
    assert "per million output tokens" in rows["test-time compute"]

    listed = CliRunner().invoke(app, ["results", "list", "--kind", "inference", "--db", str(db),
                                      "--json"])
    assert listed.exit_code == 0, listed.output
    stored = json.loads(listed.stdout)
    assert [r["id"] for r in stored] == [rec["id"]]
    shown = CliRunner().invoke(app, ["results", "list", "--kind", "inference", "--db",
                                     str(db)])
    assert "decode b4" in shown.stdout, shown.stdout
    # the report plots the twin run's decode curve (2 batch sizes), without a roofline on CPU
    html = render_report(ResultStore(db)).html
    plot = re.search(r'alt="decode tokens per second against batch size" data-points="(\d+)"',
                     html)
    assert plot and int(plot.group(1)) == 2, "no decode plot for the twin run in the report"
    assert "no roofline for" in html


@pytest.mark.twin
def test_ctrl_c_names_the_job_that_keeps_running(twin, tmp_path: Path) -> None:
    env = {**__import__("os").environ, FAULT_ENV: "inference-hold-s=300", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([PCTK, "bench", "inference", *TWIN_ARGS, "--run-dir",
                             str(tmp_path), "--timeout", "600", "--no-store"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    job_id = ""
    try:
        deadline = time.monotonic() + 120
        while "holding" not in "".join(p.read_text() for p in tmp_path.glob("slurm-*.out")):
            assert time.monotonic() < deadline and proc.poll() is None, "the job never started"
            time.sleep(0.2)
        job_id = next(tmp_path.glob("slurm-*.out")).stem.split("-")[1]
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert err.splitlines()[-1] == (f"pctk: stopped waiting; job {job_id} keeps running. "
                                        f"Cancel with: pctk cancel {job_id}"), err
        assert "Traceback" not in err
    finally:
        twin.clean_up(proc, job_id)
