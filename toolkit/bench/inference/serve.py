"""``pctk bench inference --mode serve``: an OpenAI-compatible server as one Slurm job, a load
generator as another, as plain functions that return the record.

:func:`plan` turns the command's settings into a :class:`ServeJob`; :func:`render_server`
and :func:`render_load` write the two batch scripts; :func:`run` submits the server job,
waits until it answers, submits the load job on another node (``--exclude`` of the server's
node), follows both, then cancels the server and returns the record (kind ``serving``).

The server job builds a checkpoint of the ``--model`` shape (``benchmarks.serving.
checkpoint``: random weights, a tokenizer built locally) unless ``--checkpoint`` names the
user's own folder, then runs ``benchmarks.serving.server``: ``vllm serve`` with
``--tensor-parallel-size`` = the GPUs per node on GPU nodes, ``transformers serve`` on CPU
nodes. It writes ``server.json`` (its URL) in the run folder when it answers (after building
the checkpoint and loading it, however long that takes within ``--server-timeout`` of the
server starting); only then is the load job (``benchmarks.serving.load``) submitted. The
server stops by itself once the load's record is written (``--stop-after``), so a server
whose pctk died never outlives its load, and its job has a time limit by default. Ctrl-C,
SIGTERM or SIGHUP cancel both jobs and wait until Slurm has ended them (no process of theirs
left), then the command exits 130.
"""

from __future__ import annotations

import math
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.fsdp.config import PRESETS
from benchmarks.record import read_record, write_record
from toolkit import slurm
from toolkit.bench.inference.driver import csv, parse_ints
from toolkit.bench.jobrun import Ran
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_text
from toolkit.joblog import no_record_error
from toolkit.paths import code_root, new_run_dir
from toolkit.progress import ProgressLines
from toolkit.submit.jobspec import JobSpec, sbatch_header

REPO = code_root()
BACKENDS = ("auto", "transformers", "vllm")
# (concurrencies, requests per level, prompt tokens, output tokens, SLO TTFT ms, SLO TPOT ms)
CPU_DEFAULTS = ("1,2", 4, 32, 16, 2000.0, 200.0)
GPU_DEFAULTS = ("1,4,16,64", 0, 512, 128, 500.0, 50.0)
CANCEL_WAIT_S = 120.0


@dataclass(frozen=True)
class ServeJob:
    """Everything the two batch scripts need; no Slurm or filesystem access here."""

    model: str
    run_dir: Path
    backend: str = "transformers"
    checkpoint: Path | None = None
    gpus_per_node: int = 0
    partition: str | None = None
    load_partition: str | None = None
    device: str = "auto"
    concurrencies: tuple[int, ...] = (1, 2)
    requests: int = 4
    prompt_tokens: int = 32
    output_tokens: int = 16
    slo_ttft_ms: float = 2000.0
    slo_tpot_ms: float = 200.0
    server_timeout: float = 900.0
    time_limit: str | None = None
    price_usd_per_hour: float | None = None  # the server node's, from the catalog
    python: str = sys.executable
    repo: Path = REPO

    @property
    def record_path(self) -> Path:
        return self.run_dir / "record.json"

    @property
    def endpoint_path(self) -> Path:
        return self.run_dir / "server.json"

    @property
    def model_path(self) -> Path:
        return self.checkpoint or self.run_dir / "model"

    def server_args(self) -> list[str]:
        args = ["--backend", self.backend, "--model-path", str(self.model_path),
                "--endpoint-file", str(self.endpoint_path), "--log",
                str(self.run_dir / "server.log"), "--ready-timeout", f"{self.server_timeout:g}",
                "--stop-after", str(self.record_path)]
        if self.backend == "vllm":
            args += ["--tensor-parallel", str(max(self.gpus_per_node, 1))]
        else:
            args += ["--device", "cpu" if self.gpus_per_node == 0 else self.device]
        return args

    def load_args(self) -> list[str]:
        return ["--endpoint-file", str(self.endpoint_path), "--wait",
                f"{self.server_timeout:g}", "--concurrencies", csv(self.concurrencies),
                "--requests", str(self.requests), "--prompt-tokens", str(self.prompt_tokens),
                "--output-tokens", str(self.output_tokens), "--slo-ttft-ms",
                f"{self.slo_ttft_ms:g}", "--slo-tpot-ms", f"{self.slo_tpot_ms:g}",
                "--out", str(self.record_path), "--label", f"model={self.model}",
                "--label", f"gpus_per_node={self.gpus_per_node}",
                *(["--label", f"checkpoint={self.checkpoint}"] if self.checkpoint else []),
                *(["--price-usd-per-hour", f"{self.price_usd_per_hour:g}"]
                  if self.price_usd_per_hour else [])]


@dataclass(frozen=True)
class ServeRun(Ran):
    job: ServeJob
    job_id: str  # the load job, which writes the record
    server_job_id: str = ""
    state: str | None = None
    record: dict[str, Any] | None = None

    @property
    def log(self) -> Path:
        return self.job.run_dir / f"load-{self.job_id}.out"


# the longest start-up a server is waited for; the server job's Slurm time limit is made
# from it, so inf or 1e400 would be no limit at all (and no integer of minutes)
MAX_SERVER_TIMEOUT_S = 7 * 24 * 3600


def plan(*, model: str, checkpoint: Path | None, backend: str, partition: str | None,
         load_partition: str | None, gpus_per_node: int | None, device: str,
         concurrencies: str | None, requests: int | None, prompt_tokens: int | None,
         output_tokens: int | None, slo_ttft_ms: float | None, slo_tpot_ms: float | None,
         server_timeout: float, time_limit: str | None, run_dir: Path | None,
         instance_gpus: int = 0, price_usd_per_hour: float | None = None) -> ServeJob:
    """The job, validated: vLLM on GPU nodes, transformers' server on CPU nodes."""
    model = model.lower()
    if model not in PRESETS:
        raise PctkError(f"unknown model preset {model!r}", f"use one of {', '.join(PRESETS)}")
    if backend not in BACKENDS:
        raise PctkError(f"--backend {backend!r} is not auto, transformers or vllm")
    gpus = (instance_gpus if instance_gpus else 0) if gpus_per_node is None else gpus_per_node
    if gpus < 0:
        raise PctkError("--gpus-per-node cannot be negative")
    if backend == "auto":
        backend = "vllm" if gpus else "transformers"
    if backend == "vllm" and not gpus:
        raise PctkError("--backend vllm needs GPUs", "request them (--gpus-per-node) or use "
                        "--backend transformers on CPU nodes")
    if checkpoint is not None:
        checkpoint = checkpoint.expanduser().resolve()
        if not (checkpoint / "config.json").is_file():
            raise PctkError(f"--checkpoint {str(checkpoint)!r} has no config.json",
                            "give a folder saved with save_pretrained (config, weights, "
                            "tokenizer) on storage every node sees")
    d = GPU_DEFAULTS if gpus else CPU_DEFAULTS
    for flag, slo in (("--slo-ttft-ms", slo_ttft_ms), ("--slo-tpot-ms", slo_tpot_ms)):
        if slo is not None and not math.isfinite(slo):
            raise PctkError(f"{flag} {slo:g}: an SLO must be a finite number of ms",
                            f"e.g. {flag} 500")
        if slo is not None and slo <= 0:
            raise PctkError(f"{flag} {slo:g}: an SLO must be above 0 ms", f"e.g. {flag} 500")
    job = ServeJob(
        model=model, checkpoint=checkpoint,
        run_dir=(run_dir or new_run_dir(f"serve-{model}")).resolve(), backend=backend,
        gpus_per_node=gpus, partition=partition, load_partition=load_partition or partition,
        device=device, concurrencies=parse_ints(concurrencies or d[0], "--concurrencies"),
        requests=d[1] if requests is None else requests,
        prompt_tokens=prompt_tokens or d[2], output_tokens=output_tokens or d[3],
        slo_ttft_ms=d[4] if slo_ttft_ms is None else slo_ttft_ms,
        slo_tpot_ms=d[5] if slo_tpot_ms is None else slo_tpot_ms,
        server_timeout=server_timeout, time_limit=time_limit,
        price_usd_per_hour=price_usd_per_hour)
    validate(job)
    return job


def validate(job: ServeJob) -> None:
    if not (math.isfinite(job.server_timeout) and 0 < job.server_timeout <= MAX_SERVER_TIMEOUT_S):
        raise PctkError(f"--server-timeout {job.server_timeout:g}: must be a finite number of "
                        f"seconds from 1 to {MAX_SERVER_TIMEOUT_S} (7 days): the server job's "
                        "time limit is made from it", "e.g. --server-timeout 900")
    if job.requests < 0 or job.prompt_tokens < 1 or job.output_tokens < 1:
        raise PctkError("--requests cannot be negative; --prompt-tokens and --output-tokens "
                        "must be positive")
    if job.device not in ("auto", "cuda", "cpu"):
        raise PctkError(f"--device {job.device!r} is not auto, cuda or cpu")
    if job.requests and job.requests < max(job.concurrencies):
        raise PctkError(f"--requests {job.requests} is fewer than concurrency "
                        f"{max(job.concurrencies)}: that level would never have so many in "
                        "flight", f"give --requests {max(job.concurrencies)} or more, or 0 "
                        "(4 x each concurrency)")
    shape = PRESETS[job.model]
    if job.backend == "vllm" and job.checkpoint is None and (
            shape.n_heads % job.gpus_per_node or shape.n_kv_heads % job.gpus_per_node):
        raise PctkError(f"vLLM cannot split the {job.model} shape's {shape.n_heads} heads "
                        f"({shape.n_kv_heads} KV heads) over {job.gpus_per_node} GPUs",
                        "use --gpus-per-node 1, 2, 4 or 8, or another --model")
    if job.checkpoint is None:
        longest = job.prompt_tokens + job.output_tokens
        if longest > PRESETS[job.model].max_seq_len:
            raise PctkError(f"{longest} tokens exceed the {job.model} shape's context "
                            f"({PRESETS[job.model].max_seq_len})",
                            "shorten --prompt-tokens or --output-tokens")
    for path in (job.run_dir, job.model_path):
        if any(c.isspace() for c in str(path)):
            raise PctkError(f"folder {str(path)!r} has whitespace, which #SBATCH lines "
                            "cannot carry", "pick folders with no whitespace")


def server_time_limit(job: ServeJob) -> str:
    """``--time``, else the server's start budget plus an hour of load, in minutes: a
    server whose pctk and load both died is still ended by Slurm."""
    return job.time_limit or str(int(job.server_timeout // 60) + 60)


def server_spec(job: ServeJob) -> JobSpec:
    return JobSpec(job_name=f"pctk-serve-{job.model}", nodes=1, ntasks_per_node=1,
                   gpus_per_node=job.gpus_per_node or None, partition=job.partition,
                   time=server_time_limit(job), output=str(job.run_dir / "server-%j.out"))


def load_spec(job: ServeJob) -> JobSpec:
    return JobSpec(job_name=f"pctk-serve-load-{job.model}", nodes=1, ntasks_per_node=1,
                   partition=job.load_partition, time=job.time_limit,
                   output=str(job.run_dir / "load-%j.out"))


def _preamble(job: ServeJob) -> list[str]:
    q = shlex.quote
    return ["set -euo pipefail", f"cd {q(str(job.repo))}",
            f"export PYTHONPATH={q(str(job.repo))}${{PYTHONPATH:+:${{PYTHONPATH}}}}"]


def render_server(job: ServeJob) -> str:
    """The server job's batch script, shellcheck-clean."""
    q = shlex.quote
    what = (f"the checkpoint in {job.checkpoint}" if job.checkpoint else
            f"a random-weight {job.model} checkpoint built here")
    build = [] if job.checkpoint else [
        f"{q(job.python)} -m benchmarks.serving.checkpoint --model {q(job.model)} --out "
        f"{q(str(job.model_path))} --dtype {'bfloat16' if job.gpus_per_node else 'float32'}"]
    server = " ".join(q(a) for a in job.server_args())
    return "\n".join([
        "#!/bin/bash",
        f"# Generated by pctk bench inference --mode serve: the {job.backend} server for "
        f"{what}; it writes {job.endpoint_path.name} when it answers and runs until cancelled.",
        *sbatch_header(server_spec(job)),
        *_preamble(job),
        f"rm -f {q(str(job.endpoint_path))}",
        *build,
        f"exec {q(job.python)} -m benchmarks.serving.server {server}",
    ]) + "\n"


def render_load(job: ServeJob) -> str:
    """The load job's batch script; pctk submits it with ``--exclude`` of the server's node."""
    q = shlex.quote
    load = " ".join(q(a) for a in job.load_args())
    return "\n".join([
        "#!/bin/bash",
        "# Generated by pctk bench inference --mode serve: the load generator; it waits for "
        f"{job.endpoint_path.name}, drives the server at each concurrency and writes the record.",
        *sbatch_header(load_spec(job)),
        *_preamble(job),
        f"exec {q(job.python)} -m benchmarks.serving.load {load}",
    ]) + "\n"


def job_node(job_id: str) -> str:
    r = slurm.ask(["squeue", "-h", "-j", job_id, "-o", "%N"])
    return r.stdout.strip() if r.returncode == 0 else ""


def cancel_and_wait(job_ids: list[str], timeout: float = CANCEL_WAIT_S) -> list[str]:
    """scancel the jobs and wait until the controller lists none of them (each process of a
    job is gone once it leaves COMPLETING); returns those still listed after ``timeout``."""
    slurm.cancel(*job_ids)
    deadline = time.monotonic() + timeout
    left = [j for j in job_ids if slurm.job_is_queued(j)]
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = [j for j in left if slurm.job_is_queued(j)]
    return left


def run(job: ServeJob, *, timeout: float | None = None, quiet: bool = False,
        poll: float = 1.0) -> ServeRun:
    """Both jobs, followed to the end; the server job is always cancelled before this
    returns or raises (KeyboardInterrupt included)."""
    job.run_dir.mkdir(parents=True, exist_ok=True)
    for stale in (job.endpoint_path, job.record_path):
        stale.unlink(missing_ok=True)
    server_script = atomic_write_text(job.run_dir / "server.sbatch", render_server(job))
    load_script = atomic_write_text(job.run_dir / "load.sbatch", render_load(job))
    start = time.monotonic()

    def left() -> float | None:
        return None if timeout is None else max(0.0, timeout - (time.monotonic() - start))

    first = len(slurm.SUBMITTED)  # every job sbatch took, even one a signal cut short
    with ProgressLines("bench inference --mode serve", quiet=quiet) as progress:
        try:
            server_id = slurm.sbatch([str(server_script)])
            progress.update(f"server job {server_id}: submitted")
            node = _wait_running(server_id, left(), progress, poll)
            _wait_answering(job, server_id, left(), progress, poll)
            load_id = slurm.sbatch([f"--exclude={node}", str(load_script)])
            progress.update(f"load job {load_id}: submitted (not on {node})")
            state = _follow(job, server_id, load_id, left, progress, poll)
        except BaseException:
            stuck = cancel_and_wait(slurm.SUBMITTED[first:])
            if stuck:
                progress.update(f"job(s) {' '.join(stuck)} still listed after scancel")
            raise
        ended = slurm.job_state(server_id)  # it stops by itself once the record exists
        stuck = cancel_and_wait([server_id])
        progress.update(f"server job {server_id}: "
                        + (f"stopped after the load ({ended})" if slurm.has_ended(ended)
                           else "cancelled") + (" (still listed)" if stuck else ""))
    done = ServeRun(job, load_id, server_id, state)
    if not job.record_path.exists():
        raise no_record_error(load_id, state, done.log, what="load job")
    rec = read_record(job.record_path)
    logs = [p.name for p in (done.log, job.run_dir / f"server-{server_id}.out",
                             job.run_dir / "server.log") if p.is_file()]
    rec["raw_logs"] = list(dict.fromkeys([*rec["raw_logs"], *logs]))
    rec["params"]["server_job_id"] = server_id
    write_record(job.record_path, rec)
    return replace(done, record=rec)


def _announcer(server_id: str, progress: ProgressLines
               ) -> tuple[Callable[[dict[str, str]], None], list[str]]:
    """An ``on_poll`` that says each new state of the server job, and its last state."""
    last = [""]

    def seen(states: dict[str, str]) -> None:
        state = states.get(server_id, "")
        if state and state != last[0]:
            last[0] = state
            progress.update(f"server job {server_id}: {state}")

    return seen, last


def _wait_running(server_id: str, timeout: float | None, progress: ProgressLines,
                  poll: float) -> str:
    """The server job's node once it runs; a one-line error when it ends first."""
    seen, last = _announcer(server_id, progress)
    states, timed_out = slurm.wait_jobs(
        [server_id], ended=lambda _j, s: bool(s) and not str(s).startswith("PENDING"),
        timeout=timeout, poll=poll, on_poll=seen)
    if timed_out:
        raise PctkError(f"server job {server_id} still {last[0] or 'unknown'} after the "
                        "timeout", "it is cancelled; raise --timeout or free a node")
    if not str(states[server_id]).startswith(("RUNNING", "CONFIGURING")) or not (
            node := job_node(server_id)):
        raise PctkError(f"server job {server_id} ended {states[server_id]} before serving")
    return node


def _wait_answering(job: ServeJob, server_id: str, timeout: float | None,
                    progress: ProgressLines, poll: float) -> None:
    """Until the server writes its endpoint (it has built or loaded the checkpoint and
    answers); a one-line error when its job ends first."""
    seen, _last = _announcer(server_id, progress)
    states, timed_out = slurm.wait_jobs(
        [server_id], timeout=timeout, poll=poll, on_poll=seen,
        until=job.endpoint_path.is_file, tick=min(poll, 0.5))
    if job.endpoint_path.is_file():
        progress.update(f"server job {server_id}: answering ({job.backend})")
        return
    if timed_out:
        raise PctkError(f"server job {server_id} did not answer before the timeout",
                        "it is cancelled; raise --timeout (a large --model takes a while "
                        "to build and load)")
    raise PctkError(f"server job {server_id} ended {states.get(server_id)} before serving",
                    log=str(job.run_dir / f"server-{server_id}.out"))


def _follow(job: ServeJob, server_id: str, load_id: str, left: Any,
            progress: ProgressLines, poll: float) -> str:
    """Wait for the load job; the server ending first fails the run (the load is cancelled
    by the caller). Returns the load job's final state."""
    last: dict[str, str] = {server_id: slurm.job_state(server_id) or ""}

    def seen(states: dict[str, str]) -> None:
        for j, name in ((server_id, "server"), (load_id, "load")):
            state = states.get(j, "")
            if state and state != last.get(j):
                last[j] = state
                progress.update(f"{name} job {j}: {state}")

    _states, timed_out = slurm.wait_jobs(
        [server_id, load_id], ended=lambda _j, _s: False, poll=poll, on_poll=seen,
        timeout=left(), until=lambda: slurm.has_ended(last.get(load_id))
        # a server that stops once the load wrote its record is no failure
        or (slurm.has_ended(last.get(server_id)) and not job.record_path.exists()))
    if timed_out:
        raise PctkError(f"load job {load_id} still {last.get(load_id, 'unknown')} after the "
                        "timeout", "both jobs are cancelled; raise --timeout")
    if not slurm.has_ended(last.get(load_id)):
        raise PctkError(f"server job {server_id} ended {last.get(server_id)} while the load "
                        "ran", log=str(job.run_dir / f"server-{server_id}.out"))
    return last[load_id]


def summary_rows(rec: dict[str, Any]) -> list[tuple[str, str]]:
    p, m = rec["params"], rec["metrics"]
    rows = [("server", f"{p['backend']} on {p.get('server_host')}, model {p['model_id']}"
             + (f", tensor parallel {p['tensor_parallel']}" if p.get("tensor_parallel") else "")),
            ("load", f"{p.get('load_host')}: prompts of {p['prompt_tokens']} tokens, "
                     f"{p['output_tokens']} output tokens; SLO TTFT <= {p['slo_ttft_ms']:g} "
                     f"ms, TPOT <= {p['slo_tpot_ms']:g} ms")]
    for lv in m["levels"]:
        rows.append((f"concurrency {lv['concurrency']}", (
            f"{lv['completed']}/{lv['requests']} ok, {lv['requests_per_s']:.2f} req/s, "
            f"{lv['output_tokens_per_s']:,.1f} output tokens/s; TTFT p50/p90/p99 "
            f"{_ms3(lv['ttft_s'])}; TPOT {_ms3(lv['tpot_s'])}; ITL {_ms3(lv['itl_s'])}; "
            f"goodput {lv['goodput_requests_per_s']:.2f} req/s"
            + (f"; ${cost:,.2f} per million output tokens"
               if (cost := lv.get("usd_per_million_output_tokens")) is not None else ""))))
    if not p.get("price_usd_per_hour"):
        rows.append(("cost", "no price (pass --instance-type)"))
    else:
        rows.append(("cost", f"server node at ${p['price_usd_per_hour']:,.2f}/h on demand"))
    rows.append(("verdict", " ".join([rec["verdict"]["status"], "; ".join(
        rec["verdict"]["reasons"])])))
    return rows


def _ms3(spread: dict[str, float | None]) -> str:
    """p50/p90/p99 in ms; a percentile the samples cannot carry is "-", and then the count
    and the largest value are said (a p99 of 4 requests would be their maximum)."""
    vals = [spread.get(k) for k in ("p50", "p90", "p99")]
    text = "/".join("-" if v is None else f"{v * 1e3:.1f}" for v in vals) + " ms"
    count, top = spread.get("count"), spread.get("max")
    if any(v is None for v in vals) and isinstance(count, int) and count and top is not None:
        text += f" ({count} samples, max {top * 1e3:.1f} ms; p90 needs 10, p99 100)"
    return text
