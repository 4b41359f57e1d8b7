"""Run an OpenAI-compatible inference server in a Slurm job and say where it answers.

    python -m benchmarks.serving.server --backend transformers --model-path RUN/model \\
        --endpoint-file RUN/server.json

starts the server (``transformers serve`` on CPU nodes, ``vllm serve`` with
``--tensor-parallel-size`` = ``--tensor-parallel`` on GPU nodes) on this node's address
(``$PCTK_NODE_ADDR`` on the local twin, else the host name) and a free port, waits until
``GET /v1/models`` answers, then writes ``--endpoint-file`` (JSON: url, host, model, backend,
pids) for the load job, and stays until the server ends, the ``--stop-after`` file appears
(the load's record: a server whose driver died does not outlive its load) or the job is
cancelled: SIGTERM (scancel) stops the server and every process it started, then this exits.
vLLM runs with prefix caching off: the load's prompts share words, and a cached prefix would
skip the prefill that time to first token is meant to measure.
The server's output goes to ``--log``. With ``--model-path`` a folder of the user's own
checkpoint (``config.json``, weights, tokenizer) is served as it is; pctk's driver builds
one of its shapes with ``benchmarks.serving.checkpoint`` first. Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import FrameType

from benchmarks.record import atomic_write_text

BACKENDS = ("transformers", "vllm")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.serving.server")
    p.add_argument("--backend", choices=BACKENDS, default="transformers")
    p.add_argument("--model-path", type=Path, required=True)
    p.add_argument("--endpoint-file", type=Path, required=True)
    p.add_argument("--log", type=Path, default=None, help="server output [beside the file]")
    p.add_argument("--port", type=int, default=0, help="0: a free port")
    p.add_argument("--tensor-parallel", type=int, default=1, help="vllm: GPUs per node")
    p.add_argument("--device", default="auto", help="transformers: cpu, cuda or auto")
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--ready-timeout", type=float, default=900.0)
    p.add_argument("--stop-after", type=Path, default=None,
                   help="stop the server once this file exists (the load's record)")
    p.add_argument("--executable", default=None,
                   help="the server program [transformers or vllm beside this Python, or "
                   "on PATH]")
    return p


def node_address() -> str:
    return os.environ.get("PCTK_NODE_ADDR") or socket.gethostname()


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host if host[0].isdigit() else "0.0.0.0", 0))
        return int(s.getsockname()[1])


def program(args: argparse.Namespace) -> str:
    if args.executable:
        return str(args.executable)
    name = args.backend
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else (shutil.which(name) or name)


def command(args: argparse.Namespace, host: str, port: int) -> list[str]:
    exe = program(args)
    model = str(args.model_path)
    if args.backend == "vllm":
        cmd = [exe, "serve", model, "--host", host, "--port", str(port),
               "--tensor-parallel-size", str(args.tensor_parallel),
               "--no-enable-prefix-caching"]
    else:
        cmd = [exe, "serve", model, "--host", host, "--port", str(port), "--device",
               args.device, "--log-level", "warning"]
    if args.max_model_len:
        cmd += ["--max-model-len", str(args.max_model_len)]
    return cmd


def answers(url: str) -> str | None:
    """The first model id ``url`` lists, or None while it is not up.

    Not HTTP is "not up" too: while nothing listens on a port of the kernel's ephemeral range,
    a connection to it may be given that very port as its source and connect to itself (TCP's
    simultaneous open), reading its own request back as the answer.
    """
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as r:
            data = json.loads(r.read()).get("data") or []
            return str(data[0]["id"]) if data else None
    except (OSError, ValueError, KeyError, IndexError, http.client.HTTPException):
        return None


def stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after ``grace``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


class Stopped(Exception):
    pass


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not (args.model_path / "config.json").is_file():
        print(f"benchmarks.serving.server: {args.model_path} has no config.json: not a "
              "checkpoint folder", file=sys.stderr)
        return 2
    host = node_address()
    port = args.port or free_port(host)
    url = f"http://{host}:{port}"
    log = args.log or args.endpoint_file.with_name("server.log")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "VLLM_NO_USAGE_STATS": "1",
           "DO_NOT_TRACK": "1"}
    cmd = command(args, host, port)
    print(f"pctk-serve: {socket.gethostname()}: starting {' '.join(cmd)}", flush=True)
    proc: subprocess.Popen[bytes] | None = None
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _raise)
    try:
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        deadline = time.monotonic() + args.ready_timeout
        model = None
        while model is None:
            if proc.poll() is not None:
                print(f"pctk-serve: the server exited {proc.returncode} before answering; "
                      f"see {log}", file=sys.stderr, flush=True)
                return 1
            if time.monotonic() > deadline:
                print(f"pctk-serve: the server did not answer in {args.ready_timeout:.0f}s; "
                      f"see {log}", file=sys.stderr, flush=True)
                return 1
            time.sleep(0.5)
            model = answers(url)
        atomic_write_text(args.endpoint_file, json.dumps({
            "url": url, "host": socket.gethostname(), "address": host, "port": port,
            "model": model, "backend": args.backend, "device": args.device,
            "tensor_parallel": args.tensor_parallel if args.backend == "vllm" else None,
            "job_id": os.environ.get("SLURM_JOB_ID"), "pid": os.getpid(),
            "server_pid": proc.pid}, indent=2))
        print(f"pctk-serve: {socket.gethostname()}: {args.backend} server ready at {url} "
              f"(model {model})", flush=True)
        while proc.poll() is None:
            if args.stop_after is not None and args.stop_after.exists():
                print(f"pctk-serve: {socket.gethostname()}: {args.stop_after.name} written: "
                      "stopping the server", flush=True)
                return 0
            time.sleep(0.5)
        return proc.returncode
    except Stopped as why:
        print(f"pctk-serve: {socket.gethostname()}: {why}: stopping the server", flush=True)
        return 0
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # stop() runs once, whole
            signal.signal(sig, signal.SIG_IGN)
        if proc is not None:
            stop(proc)


if __name__ == "__main__":
    sys.exit(main())
