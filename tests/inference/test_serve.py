"""``pctk bench inference --mode serve``: the two batch scripts, input errors, the load
generator's arithmetic, and whole runs on the twin: transformers' OpenAI-compatible server
in one job, the load generator on another node, the record stored, listed, trended,
plotted and exported; Ctrl-C cancels both jobs and leaves no process behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.modelmath import usd_per_million_tokens
from benchmarks.record import validate_record
from benchmarks.serving import load
from toolkit import catalog
from toolkit.bench.inference.serve import summary_rows
from toolkit.cli import app, main
from toolkit.results import metrics as m
from toolkit.results.history import load_series
from toolkit.results.prometheus import write_textfile
from toolkit.results.report import render_report
from toolkit.results.store import ResultStore

PCTK = str(Path(sys.executable).parent / "pctk")
TWIN_ARGS = ["--mode", "serve", "--model", "tiny", "--partition", "cpu", "--gpus-per-node",
             "0"]


def test_gpu_instance_serves_with_vllm_tensor_parallel_over_its_gpus(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "inference", "--mode", "serve",
                                      "--instance-type", "p5.48xlarge", "--dry-run",
                                      "--run-dir", "/x"])
    assert result.exit_code == 0, result.output
    server, load_script = result.output.split("# ---- /x/load.sbatch (submitted with "
                                              "--exclude=<the server's node>)\n")
    assert "#SBATCH --gpus-per-node=8" in server and "#SBATCH --nodes=1" in server
    assert "benchmarks.serving.checkpoint --model 1b --out /x/model --dtype bfloat16" in server
    assert ("exec " in server and "benchmarks.serving.server --backend vllm --model-path "
            "/x/model --endpoint-file /x/server.json") in server
    assert "--tensor-parallel 8" in server
    assert "--gpus-per-node" not in load_script
    assert ("benchmarks.serving.load --endpoint-file /x/server.json --wait 900 "
            "--concurrencies 1,4,16,64 --requests 0 --prompt-tokens 512 --output-tokens 128 "
            "--slo-ttft-ms 500 --slo-tpot-ms 50 --out /x/record.json") in load_script
    # the node's on-demand price from the catalog: each level's cost per million tokens
    price = catalog.get("p5.48xlarge").price_usd_per_hour
    assert price and f"--price-usd-per-hour {price:g}" in load_script
    if shutil.which("shellcheck"):
        for name, text in (("server.sbatch", server), ("load.sbatch", load_script)):
            (tmp_path / name).write_text(text)
            subprocess.run(["shellcheck", "-s", "bash", str(tmp_path / name)], check=True)


def test_cpu_nodes_serve_with_transformers_and_a_users_checkpoint(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    result = CliRunner().invoke(app, ["bench", "inference", *TWIN_ARGS, "--checkpoint",
                                      str(ckpt), "--dry-run", "--run-dir", "/x"])
    assert result.exit_code == 0, result.output
    assert "benchmarks.serving.checkpoint" not in result.output  # served as it is
    assert (f"benchmarks.serving.server --backend transformers --model-path {ckpt} "
            in result.output) and "--device cpu" in result.output
    assert "#SBATCH --partition=cpu" in result.output
    assert "--gpus-per-node" not in result.output


@pytest.mark.parametrize(("argv", "message"), [
    (["--mode", "batch"], "--mode 'batch' is not available"),
    (["--mode", "serve", "--samples", "4"], "--samples: offline-mode option(s)"),
    (["--concurrencies", "1"], "--concurrencies: serve-mode option(s), not for --mode offline"),
    (["--mode", "serve", "--nodes", "2"], "--mode serve runs one server node"),
    (["--mode", "serve", "--no-wait"], "--mode serve waits for the load"),
    (["--mode", "serve", "--backend", "vllm", "--gpus-per-node", "0"],
     "--backend vllm needs GPUs"),
    (["--mode", "serve", "--backend", "sglang"], "--backend 'sglang' is not auto"),
    (["--mode", "serve", "--concurrencies", "1,x"], "--concurrencies '1,x' is not a"),
    (["--mode", "serve", "--checkpoint", "/nonexistent"], "has no config.json"),
    (["--mode", "serve", "--model", "tiny", "--prompt-tokens", "1000", "--output-tokens",
      "100"], "1100 tokens exceed the tiny shape's context"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "inference", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_level_figures_percentiles_and_goodput() -> None:
    def row(ttft: float, tpot: float, tokens: int = 5) -> dict[str, object]:
        return {"ok": True, "error": None, "ttft_s": ttft, "tpot_s": tpot,
                "itl_s": [tpot] * (tokens - 1), "e2e_s": ttft + tpot * (tokens - 1),
                "output_tokens": tokens, "prompt_tokens": 8}

    rows = [row(0.1, 0.01), row(0.2, 0.01), row(0.3, 0.05), row(0.4, 0.01),
            {"ok": False, "error": "HTTP 503: busy", "e2e_s": 0.1, "output_tokens": 0,
             "prompt_tokens": None}]
    level = load.summarize(rows, concurrency=2, wall=2.0, slo_ttft=0.35, slo_tpot=0.02)
    assert (level["requests"], level["completed"], level["failed"]) == (5, 4, 1)
    assert level["errors"] == ["HTTP 503: busy"]
    assert level["requests_per_s"] == 2.0 and level["output_tokens_per_s"] == 10.0
    # within the SLO: 0.1 and 0.2 (0.3 misses TPOT, 0.4 misses TTFT)
    assert level["slo_met"] == 2 and level["goodput_requests_per_s"] == 1.0
    assert level["slo_met_fraction"] == 2 / 5
    assert level["ttft_s"]["p50"] == pytest.approx(0.25)  # linear between ranks
    # 4 samples carry no p90 or p99 (10 and 100 needed): the count and the largest instead
    assert level["ttft_s"]["p90"] is None and level["ttft_s"]["p99"] is None
    assert level["ttft_s"]["count"] == 4 and level["ttft_s"]["max"] == pytest.approx(0.4)
    assert level["itl_s"]["p50"] == pytest.approx(0.01)
    assert level["usd_per_million_output_tokens"] is None  # no price given
    # $36/h is a cent a second; at 10 output tokens/s a token costs a tenth of a cent
    priced = load.summarize(rows, concurrency=2, wall=2.0, slo_ttft=0.35, slo_tpot=0.02,
                            price_usd_per_hour=36.0)
    assert priced["usd_per_million_output_tokens"] == pytest.approx(1000.0)
    assert usd_per_million_tokens(36.0, 0.0) is None  # nothing came out: no figure
    status, reasons = load.verdict([level])
    assert status == "WARN" and "1 of 5 requests failed (HTTP 503: busy)" in reasons[0]
    rec = {"params": {"backend": "vllm", "server_host": "n1", "model_id": "m",
                      "load_host": "n2", "prompt_tokens": 8, "output_tokens": 5,
                      "slo_ttft_ms": 350.0, "slo_tpot_ms": 20.0, "price_usd_per_hour": 36.0},
           "metrics": {"levels": [priced]}, "verdict": {"status": status, "reasons": reasons}}
    rows_shown = dict(summary_rows(rec))
    assert "$1,000.00 per million output tokens" in rows_shown["concurrency 2"]
    assert rows_shown["cost"] == "server node at $36.00/h on demand"
    assert load.percentile([], 50) is None
    assert load.prompt_text(40, 3).count(" ") == 39


def run_in_env(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.twin
def test_server_and_load_on_two_nodes_stored_listed_plotted_exported(
        twin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    db = tmp_path / "results.db"
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["bench", "inference", *TWIN_ARGS, "--concurrencies",
                                      "1,2", "--requests", "4", "--prompt-tokens", "24",
                                      "--output-tokens", "12", "--run-dir", str(run_dir),
                                      "--db", str(db), "--timeout", "300", "--json"])
    assert result.exit_code == 0, result.output
    rec = validate_record(json.loads(result.stdout))
    assert rec["kind"] == "serving" and rec["verdict"]["status"] == "PASS", rec["verdict"]
    p = rec["params"]
    assert p["backend"] == "transformers" and p["model"] == "tiny"
    assert p["server_host"] != p["load_host"]  # server on one node, load on the other
    assert rec["cluster"]["nodes"] == 2 and rec["cluster"]["twin"] is True
    endpoint = json.loads((run_dir / "server.json").read_text())
    assert endpoint["url"].startswith("http://127.") and endpoint["host"] == p["server_host"]
    assert [lv["concurrency"] for lv in rec["metrics"]["levels"]] == [1, 2]
    for lv in rec["metrics"]["levels"]:
        assert lv["completed"] == lv["requests"] == 4 and lv["failed"] == 0
        # the server's own count: the checkpoint has no end token, one word is one token
        assert lv["mean_output_tokens"] == 12 and lv["mean_prompt_tokens"] == 24
        assert lv["output_tokens_per_s"] == pytest.approx(48 / lv["wall_s"])
        for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
            # a median of 4 requests, but no p90 or p99 (10 and 100 needed): their largest
            spread = lv[key]
            assert 0 <= spread["p50"] <= spread["max"]
            assert (spread["p90"] is None) == (spread["count"] < 10)
            assert (spread["p99"] is None) == (spread["count"] < 100)
        # a gap is 0 when two tokens' events arrive in one read (a busy host; CI saw the
        # median gap at 0.0); the others are real spans of time
        assert min(lv[k]["p50"] for k in ("ttft_s", "tpot_s", "e2e_s")) > 0
        assert lv["ttft_s"]["max"] < lv["e2e_s"]["max"]
    assert {"server.log", "load-" + rec["cluster"]["job_id"] + ".out"} <= set(rec["raw_logs"])
    assert "concurrency 2" in dict(summary_rows(rec))
    # the server job was cancelled before the command returned
    assert twin.cmd("squeue", "-h", "-j", p["server_job_id"], check=False).stdout.strip() == ""

    listed = CliRunner().invoke(app, ["results", "list", "--kind", "serving", "--db", str(db)])
    assert listed.exit_code == 0 and "TTFT max" in listed.stdout, listed.output
    store = ResultStore(db)
    assert [r["id"] for r in store.latest("serving")] == [rec["id"]]
    series = {(s.key.metric, s.key.where) for s in load_series(store, kind="serving")}
    assert ("output_tokens_per_s", "concurrency 2") in series
    assert ("goodput_requests_per_s", "concurrency 1") in series
    html = render_report(store).html
    plot = re.search(r'alt="time to first token and time per output token, p50, p90 and p99, '
                     r'against concurrency" data-points="(\d+)"', html)
    assert plot and int(plot.group(1)) == 2, "no serving plot in the report"
    out, _count = write_textfile(store, tmp_path / "pctk.prom", 0.05)
    prom = out.read_text()
    assert re.search(r'pctk_serving_ttft_seconds\{[^}]*concurrency="2"[^}]*quantile="0.50"'
                     r'[^}]*\} ', prom), prom[:2000]
    assert "pctk_serving_goodput_requests_per_second{" in prom
    assert m.serving_scalars(rec)["c1_tpot_s_p50"] == rec["metrics"]["levels"][0]["tpot_s"][
        "p50"]


def job_processes(marker: str) -> list[tuple[int, str]]:
    """Processes whose command line names ``marker`` (the test's own run folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append((int(proc.name), cmd))
    return found


@pytest.mark.twin
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_cancels_server_and_load_and_leaves_no_process(twin, tmp_path: Path,
                                                             stop: signal.Signals) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([PCTK, "bench", "inference", *TWIN_ARGS, "--concurrencies", "1",
                             "--requests", "100000", "--run-dir", str(run_dir), "--timeout",
                             "600", "--no-store"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    ids: list[str] = []
    try:
        deadline = time.monotonic() + 150
        while "driving http://" not in "".join(
                p.read_text() for p in run_dir.glob("load-*.out")) or not (
                run_dir / "server.json").is_file():
            assert time.monotonic() < deadline and proc.poll() is None, \
                "the load never started driving the server"
            time.sleep(0.3)
        time.sleep(2)  # requests in flight
        endpoint = json.loads((run_dir / "server.json").read_text())
        ids = [endpoint["job_id"], next(run_dir.glob("load-*.out")).stem.split("-")[1]]
        pids = [endpoint["pid"], endpoint["server_pid"]]
        assert all(Path(f"/proc/{pid}").exists() for pid in pids)  # the server is up
        assert job_processes(str(run_dir)), "no job process to stop"
        proc.send_signal(stop)
        _out, err = proc.communicate(timeout=150)
        assert proc.returncode == 130, err
        assert err.splitlines()[-1] == ("pctk: interrupted; no job of this command is left "
                                        "running"), err
        assert "Traceback" not in err
        listed = twin.cmd("squeue", "-h", "-j", ",".join(ids), check=False).stdout
        assert listed.strip() == "", listed
        assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        assert job_processes(str(run_dir)) == []
        assert "CANCELLED" in (run_dir / f"server-{ids[0]}.out").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if ids:
            twin.cmd("scancel", *ids, check=False)


def serving_record(tokens_per_s: float) -> dict[str, object]:
    """A serving record whose one level ran at ``tokens_per_s`` (4 tokens per request)."""
    from benchmarks.record import new_record

    rows = [{"ok": True, "error": None, "ttft_s": 0.1, "tpot_s": 0.01, "itl_s": [0.01] * 3,
             "e2e_s": 0.13, "output_tokens": 4, "prompt_tokens": 8}] * 8
    level = load.summarize(rows, concurrency=4, wall=32 / tokens_per_s, slo_ttft=1, slo_tpot=1)
    rec = new_record("serving", params={"backend": "vllm"}, metrics={"levels": [level]},
                     cluster={"name": "c", "instance_type": "p5.48xlarge"},
                     describe_this_machine=False, software={})
    return validate_record(rec)


def test_a_drop_of_output_tokens_per_second_is_a_regression() -> None:
    from toolkit.results.compare import compare_records

    out = compare_records(serving_record(80.0), serving_record(100.0), threshold=0.05)
    points = {(p.metric, p.where): p for p in out.points}
    assert points[("output_tokens_per_s", "concurrency 4")].regression
    assert points[("goodput_requests_per_s", "concurrency 4")].regression
    same = compare_records(serving_record(99.0), serving_record(100.0), threshold=0.05)
    assert not any(p.regression for p in same.points) and len(same.points) == 2
    # 8 requests carry no p99: the headline gives their slowest, named as such
    headline = m.headline(serving_record(80.0))
    assert headline == "c4 80 tok/s TTFT max 100 ms goodput 20.00 req/s"


@pytest.mark.twin
def test_a_server_that_cannot_start_ends_the_run_in_one_line_with_no_job_left(
        twin, tmp_path: Path) -> None:
    """A checkpoint transformers cannot load: the server job fails, the load job waiting for
    it is cancelled, and the command says where the server's log is."""
    ckpt = tmp_path / "broken"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"model_type": "llama"}')  # no weights, no tokenizer
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run_dir = tmp_path / "run"
    r = subprocess.run([PCTK, "bench", "inference", *TWIN_ARGS, "--checkpoint", str(ckpt),
                        "--run-dir", str(run_dir), "--timeout", "240", "--no-store"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    # the load job is submitted once the server job runs, unless it failed before a poll saw it
    assert re.match(r"pctk: error: server job \d+ ended FAILED (while the load ran|before "
                    r"serving)", last), last
    assert "Traceback" not in r.stderr
    assert "the server exited" in next(run_dir.glob("server-*.out")).read_text()
    # no job of this run is queued (%o: the batch script, in its folder)
    queued = twin.cmd("squeue", "-h", "-o", "%i %o", check=False).stdout
    assert str(run_dir) not in queued, queued


def _stream(events: list[dict[str, object] | str]) -> bytes:
    return b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode()
                    for e in events)


def _serve_streams(bodies: dict[str, bytes], prompts: list[str], delay: float = 0.0):
    """An aiohttp server on loopback whose /v1/completions answers ``bodies[prompt]`` (or
    the ``*`` body), each event written on its own with ``delay`` between them; every prompt
    it got is appended to ``prompts``."""
    import asyncio

    from aiohttp import web

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompts.append(body["prompt"])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for event in bodies.get(body["prompt"], bodies["*"]).split(b"\n\n"):
            if event:
                await resp.write(event + b"\n\n")
                await asyncio.sleep(delay)
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    return app


async def _with_server(app, coro_fn):  # type: ignore[no-untyped-def]
    import aiohttp
    from aiohttp import web

    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession() as session:
            return await coro_fn(session, f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()


def _text(t: str, finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"text": t, "finish_reason": finish}]}


def test_a_stream_that_errors_or_stops_short_is_a_failed_request() -> None:
    """transformers serve sends a failed generation as an ``error`` event with HTTP 200; a
    stream cut before its finish_reason is no whole answer either."""
    import asyncio

    usage = {"usage": {"completion_tokens": 3, "prompt_tokens": 2}, "choices": []}
    bodies = {"good": _stream([_text("a"), _text(" b"), _text(" c"), _text("", "length"),
                               usage, "[DONE]"]),
              "error": _stream([_text("a"), {"error": "CUDA out of memory"}]),
              "*": _stream([_text("a"), _text(" b")])}
    app = _serve_streams(bodies, [], delay=0.05)

    async def go(session, url):  # type: ignore[no-untyped-def]
        return [await load.one_request(session, url, {"prompt": p}) for p in
                ("good", "error", "short")]

    good, error, short = asyncio.run(_with_server(app, go))
    assert good["ok"] and good["output_tokens"] == 3
    # TPOT: (end - first text) / (tokens - 1): the two later texts and the finish event, usage
    # and [DONE] after them, four writes 0.05 s apart after the first text
    assert good["tpot_s"] == pytest.approx((good["e2e_s"] - good["ttft_s"]) / 2)
    assert good["tpot_s"] >= 4 * 0.05 / 2 and len(good["itl_s"]) == 2
    assert not error["ok"] and error["error"] == "server error: CUDA out of memory"
    assert not short["ok"] and short["error"] == "the stream ended without a finish_reason"


def test_no_prompt_is_sent_twice_across_warmup_and_levels() -> None:
    """A server that caches prefixes (vLLM's default) would skip the prefill of a repeated
    prompt and understate TTFT: every request of a run gets its own prompt."""
    import asyncio

    prompts: list[str] = []
    app = _serve_streams({"*": _stream([_text("a"), _text(" b", "length")])}, prompts)
    args = load.parser().parse_args(["--url", "http://x", "--concurrencies", "1,2",
                                     "--requests", "3", "--prompt-tokens", "6",
                                     "--output-tokens", "2", "--warmup", "1"])

    async def go(_session, url):  # type: ignore[no-untyped-def]
        return await load.drive(args, {"url": url, "backend": "vllm", "model": "m"})

    result = asyncio.run(_with_server(app, go))
    assert [lv["completed"] for lv in result["levels"]] == [3, 3]
    assert len(prompts) == 1 + 3 + 3 and len(set(prompts)) == len(prompts)


@pytest.mark.parametrize(("argv", "message"), [
    (["--requests", "2", "--concurrencies", "1,4"], "--requests 2 is fewer than concurrency 4"),
    (["--slo-ttft-ms", "0"], "--slo-ttft-ms 0: an SLO must be above 0 ms"),
    # a server wait of no end has no time limit in minutes (it was int(nan): a traceback)
    (["--server-timeout", "inf"], "--server-timeout inf: must be a finite number of seconds "
     "from 1 to 604800 (7 days)"),
    (["--server-timeout", "1e400"], "--server-timeout inf: must be a finite number"),
    (["--server-timeout", "604801"], "--server-timeout 604801: must be a finite number"),
    (["--slo-tpot-ms", "inf"], "--slo-tpot-ms inf: an SLO must be a finite number of ms"),
    (["--instance-type", "p5.48xlarge", "--gpus-per-node", "3"],
     "vLLM cannot split the tiny shape's 4 heads (2 KV heads) over 3 GPUs"),
])
def test_serve_plans_that_cannot_measure_what_they_say_are_refused(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "inference", "--mode", "serve", "--model", "tiny", "--dry-run",
                 *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_server_job_has_a_time_limit_and_vllm_no_prefix_cache() -> None:
    result = CliRunner().invoke(app, ["bench", "inference", "--mode", "serve", "--model", "8b",
                                      "--instance-type", "p5.48xlarge", "--dry-run",
                                      "--run-dir", "/x"])
    assert result.exit_code == 0, result.output
    server, _load = result.output.split("# ---- ")
    assert "#SBATCH --time=75" in server  # --server-timeout 900 s + an hour of load
    assert "--stop-after /x/record.json" in server
    from benchmarks.serving import server as srv

    args = srv.parser().parse_args(["--backend", "vllm", "--model-path", "/m",
                                    "--endpoint-file", "/x/server.json"])
    assert "--no-enable-prefix-caching" in srv.command(args, "10.0.0.1", 8000)


def test_the_longest_server_timeout_still_makes_a_time_limit() -> None:
    result = CliRunner().invoke(app, ["bench", "inference", "--mode", "serve", "--model", "tiny",
                                      "--server-timeout", "604800", "--dry-run", "--run-dir",
                                      "/x"])
    assert result.exit_code == 0, result.output
    assert "#SBATCH --time=10140" in result.output  # 7 days of start-up + an hour of load


def test_a_port_that_answers_with_something_not_http_is_not_up_yet() -> None:
    """What a self-connected probe reads (its own request, TCP's simultaneous open while the
    server is not listening yet) is "not up", not a crash of the server job."""
    import socket
    import threading

    from benchmarks.serving.server import answers

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()

        def echo_request() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.sendall(conn.recv(4096))  # the request line back, as a self-connect reads

        t = threading.Thread(target=echo_request, daemon=True)
        t.start()
        assert answers(f"http://127.0.0.1:{srv.getsockname()[1]}") is None
        t.join(10)
