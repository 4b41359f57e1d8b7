"""Load generator for an OpenAI-compatible server: a ladder of concurrencies, streamed
completions, per-token timing, one result record (kind ``serving``).

    python -m benchmarks.serving.load --endpoint-file RUN/server.json --concurrencies 1,4,16 \\
        --requests 64 --prompt-tokens 256 --output-tokens 128 --out RUN/record.json

At each concurrency c it keeps c requests in flight (closed loop: a worker sends its next
request when its last one ends) until ``--requests`` have been sent, each a streamed
``POST /v1/completions`` (``stream_options.include_usage``; ``ignore_eos`` for vLLM).
Per request it times the first streamed text (TTFT), the gaps between text chunks
(inter-token latency, ITL), and ``(end - first) / (output tokens - 1)`` (TPOT); the output
tokens are the server's ``usage.completion_tokens`` (the text chunks when it gives none).
Per level: p50/p90/p99 of TTFT, TPOT, ITL and end-to-end latency, requests/s and output
tokens/s over the level's wall time, and goodput: the requests/s that met the SLO (TTFT and
TPOT both within ``--slo-ttft-ms`` and ``--slo-tpot-ms``).

The server job (``benchmarks.serving.server``) writes ``--endpoint-file`` once it answers;
this waits for it (``--wait`` seconds). Node-side: the standard library and aiohttp.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import re
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.modelmath import usd_per_million_tokens
from benchmarks.record import new_record, write_record

CORPUS = Path(__file__).with_name("corpus.txt")
PERCENTILES = (50, 90, 99)


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers, e.g. 1,4,16")
    return values


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.serving.load")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="the server's base URL, e.g. http://node:8000")
    where.add_argument("--endpoint-file", type=Path,
                       help="JSON the server job writes when ready: {url, model, ...}")
    p.add_argument("--wait", type=float, default=600,
                   help="seconds to wait for --endpoint-file and the server's answer")
    p.add_argument("--model", default=None, help="model id [the server's first]")
    p.add_argument("--concurrencies", type=_ints, default=[1, 4, 16])
    p.add_argument("--requests", type=int, default=0,
                   help="requests per level [0: 4 x concurrency, at least 8]")
    p.add_argument("--prompt-tokens", type=int, default=128,
                   help="prompt length in words of the shipped text (one token each with "
                   "pctk's checkpoint tokenizer)")
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument("--warmup", type=int, default=1, help="untimed requests before the ladder")
    p.add_argument("--slo-ttft-ms", type=float, default=1000.0)
    p.add_argument("--slo-tpot-ms", type=float, default=100.0)
    p.add_argument("--request-timeout", type=float, default=600.0)
    p.add_argument("--price-usd-per-hour", type=float, default=None,
                   help="on-demand price of the server's node: each level's cost per million "
                        "output tokens")
    p.add_argument("--out", type=Path, default=None, help="record path (else JSON to stdout)")
    p.add_argument("--label", action="append", default=[],
                   help="KEY=VALUE copied into the record's params (the driver's settings)")
    return p


def progress(message: str) -> None:
    print(f"pctk-serve: {socket.gethostname()}: {message}", flush=True)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None when empty."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def samples_for(q: float) -> int:
    """The fewest samples that give percentile ``q`` a sample beyond it: 10 for p90, 100 for
    p99 (p50: 1). With fewer, the "p99" is only the largest value under another name."""
    return 1 if q <= 50 else math.ceil(100 / (100 - q))


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """Percentiles that the samples can carry (None for those that need more,
    :func:`samples_for`), the mean, the count and the largest value."""
    n = len(values)
    out: dict[str, float | None] = {
        f"p{q}": percentile(values, q) if n >= samples_for(q) else None for q in PERCENTILES}
    out["mean"] = sum(values) / n if values else None
    out["count"] = n
    out["max"] = max(values) if values else None
    return out


def prompt_text(words: int, offset: int) -> str:
    """``words`` words of the shipped corpus from ``offset`` on, wrapping around."""
    corpus = re.findall(r"\w+", CORPUS.read_text())
    return " ".join(corpus[(offset + i) % len(corpus)] for i in range(words))


def wait_endpoint(path: Path, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            endpoint = json.loads(path.read_text())
            if isinstance(endpoint, dict) and endpoint.get("url"):
                return endpoint
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no server endpoint in {path} after {timeout:.0f}s")
        time.sleep(0.5)


async def first_model(session: Any, url: str, timeout: float) -> str:
    """The first model id the server lists, retried until it answers or ``timeout``."""
    import aiohttp

    deadline = time.monotonic() + timeout
    while True:
        try:
            async with session.get(f"{url}/v1/models") as r:
                if r.status == 200:
                    data = (await r.json()).get("data") or []
                    if data:
                        return str(data[0]["id"])
        except (aiohttp.ClientError, OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}/v1/models gave no model in {timeout:.0f}s")
        await asyncio.sleep(0.5)


async def one_request(session: Any, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed completion, timed per text chunk."""
    start = time.perf_counter()
    stamps: list[float] = []
    usage: dict[str, Any] | None = None
    finished = False  # a choice with a finish_reason: the server says the answer is whole
    error = None
    try:
        async with session.post(f"{url}/v1/completions", json=body) as r:
            if r.status != 200:
                error = f"HTTP {r.status}: {(await r.text())[:200]}"
            else:
                buf = b""
                async for chunk in r.content.iter_any():
                    now = time.perf_counter()
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        line = line.strip()
                        if not line.startswith(b"data:"):
                            continue
                        data = line[5:].strip()
                        if data == b"[DONE]":
                            continue
                        event = json.loads(data)
                        if event.get("error"):  # a generation that failed, sent with HTTP 200
                            error = f"server error: {event['error']}"[:200]
                            break
                        if event.get("usage"):
                            usage = event["usage"]
                        choices = event.get("choices") or []
                        if any(c.get("text") for c in choices):
                            stamps.append(now)
                        finished = finished or any(c.get("finish_reason") for c in choices)
                    if error is not None:
                        break
    except Exception as exc:  # a dropped connection or a timeout is a failed request
        error = f"{type(exc).__name__}: {exc}"[:200]
    end = time.perf_counter()
    if error is None and not stamps:
        error = "no text streamed"
    if error is None and not finished:
        error = "the stream ended without a finish_reason"
    out_tokens = int(usage["completion_tokens"]) if usage and usage.get(
        "completion_tokens") else len(stamps)
    row: dict[str, Any] = {"ok": error is None, "error": error, "e2e_s": end - start,
                           "output_tokens": out_tokens,
                           "prompt_tokens": usage.get("prompt_tokens") if usage else None}
    if stamps:
        # TTFT: the first text; TPOT: the rest of the request over the other tokens,
        # (e2e - TTFT) / (output tokens - 1), as vLLM's and aiperf's benchmarks count it
        row["ttft_s"] = stamps[0] - start
        row["itl_s"] = [b - a for a, b in itertools.pairwise(stamps)]
        row["tpot_s"] = (end - stamps[0]) / (out_tokens - 1) if out_tokens > 1 else None
    return row


def request_body(model: str, args: argparse.Namespace, n: int, backend: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model, "prompt": prompt_text(args.prompt_tokens, 37 * n),
        "max_tokens": args.output_tokens, "temperature": 0.0, "stream": True,
        "stream_options": {"include_usage": True}}
    if backend == "vllm":  # random weights may emit the end token early: run to max_tokens
        body["ignore_eos"] = True
        body["min_tokens"] = args.output_tokens
    return body


def level_requests(args: argparse.Namespace, concurrency: int) -> int:
    return args.requests or max(8, 4 * concurrency)


async def run_level(session: Any, url: str, model: str, args: argparse.Namespace,
                    concurrency: int, backend: str, first: int = 0) -> dict[str, Any]:
    """``concurrency`` requests in flight until the level's count was sent; prompts
    ``first``.. (numbered across the run, so no level repeats an earlier one's prompts)."""
    total = level_requests(args, concurrency)
    queue = iter(range(first, first + total))
    rows: list[dict[str, Any]] = []

    async def worker() -> None:
        for n in queue:
            rows.append(await one_request(session, url, request_body(model, args, n, backend)))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    return summarize(rows, concurrency, wall, args.slo_ttft_ms / 1e3, args.slo_tpot_ms / 1e3,
                     args.price_usd_per_hour)


def summarize(rows: list[dict[str, Any]], concurrency: int, wall: float, slo_ttft: float,
              slo_tpot: float, price_usd_per_hour: float | None = None) -> dict[str, Any]:
    ok = [r for r in rows if r["ok"]]
    good = [r for r in ok if r["ttft_s"] <= slo_ttft and (r["tpot_s"] is None
                                                          or r["tpot_s"] <= slo_tpot)]
    out_tokens = sum(r["output_tokens"] for r in ok)
    prompts = [r["prompt_tokens"] for r in ok if r["prompt_tokens"] is not None]
    return {
        "concurrency": concurrency, "requests": len(rows), "completed": len(ok),
        "failed": len(rows) - len(ok),
        "errors": sorted({r["error"] for r in rows if r["error"]})[:5],
        "wall_s": wall, "requests_per_s": len(ok) / wall, "output_tokens": out_tokens,
        "output_tokens_per_s": out_tokens / wall,
        "mean_prompt_tokens": sum(prompts) / len(prompts) if prompts else None,
        "mean_output_tokens": out_tokens / len(ok) if ok else None,
        "ttft_s": spread([r["ttft_s"] for r in ok]),
        "tpot_s": spread([r["tpot_s"] for r in ok if r["tpot_s"] is not None]),
        "itl_s": spread([g for r in ok for g in r["itl_s"]]),
        "e2e_s": spread([r["e2e_s"] for r in ok]),
        "slo_met": len(good), "goodput_requests_per_s": len(good) / wall,
        "slo_met_fraction": len(good) / len(rows) if rows else 0.0,
        # the whole node serves (vLLM's tensor parallel takes all its GPUs): its hourly price
        # buys these tokens
        "usd_per_million_output_tokens": usd_per_million_tokens(price_usd_per_hour,
                                                                out_tokens / wall),
    }


async def drive(args: argparse.Namespace, endpoint: dict[str, Any]) -> dict[str, Any]:
    import aiohttp

    url = endpoint["url"].rstrip("/")
    backend = str(endpoint.get("backend") or "openai")
    limit = max(args.concurrencies) + 4
    timeout = aiohttp.ClientTimeout(total=args.request_timeout)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit),
                                     timeout=timeout) as session:
        model = args.model or endpoint.get("model") or await first_model(session, url,
                                                                            args.wait)
        for n in range(args.warmup):
            await one_request(session, url, request_body(model, args, n, backend))
        levels = []
        first = args.warmup
        for c in args.concurrencies:
            level = await run_level(session, url, model, args, c, backend, first)
            first += level_requests(args, c)
            progress(f"concurrency {c}: {level['completed']}/{level['requests']} requests, "
                     f"{level['requests_per_s']:.2f} req/s, {level['output_tokens_per_s']:.1f} "
                     f"output tokens/s, TTFT p50 {_ms(level['ttft_s']['p50'])}, TPOT p50 "
                     f"{_ms(level['tpot_s']['p50'])}, goodput "
                     f"{level['goodput_requests_per_s']:.2f} req/s")
            levels.append(level)
    return {"model_id": model, "url": url, "backend": backend, "levels": levels}


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms"


def verdict(levels: list[dict[str, Any]]) -> tuple[str, list[str]]:
    reasons = []
    status = "PASS"
    for lv in levels:
        if lv["completed"] == 0:
            status = "FAIL"
            reasons.append(f"concurrency {lv['concurrency']}: no request completed "
                           f"({'; '.join(lv['errors'])})")
        elif lv["failed"]:
            status = "FAIL" if status == "FAIL" else "WARN"
            reasons.append(f"concurrency {lv['concurrency']}: {lv['failed']} of "
                           f"{lv['requests']} requests failed ({'; '.join(lv['errors'])})")
    best = max(levels, key=lambda lv: lv["goodput_requests_per_s"])
    reasons.append(f"best goodput {best['goodput_requests_per_s']:.2f} req/s at concurrency "
                   f"{best['concurrency']} ({best['slo_met_fraction']:.0%} within the SLO)")
    return status, reasons


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    problem = None
    if args.prompt_tokens < 1 or args.output_tokens < 1:
        problem = "--prompt-tokens and --output-tokens must be positive"
    elif args.requests < 0:
        problem = "--requests cannot be negative (0: 4 x each concurrency)"
    elif args.requests and args.requests < max(args.concurrencies):
        problem = (f"--requests {args.requests} is fewer than concurrency "
                   f"{max(args.concurrencies)}: that level would never have so many in flight")
    elif args.price_usd_per_hour is not None and args.price_usd_per_hour <= 0:
        problem = "--price-usd-per-hour must be above 0 (leave it out for no cost figure)"
    elif args.request_timeout <= 0 or args.wait <= 0:
        problem = "--request-timeout and --wait must be above 0 seconds (requests are bounded)"
    if problem:
        print(f"benchmarks.serving.load: {problem}", file=sys.stderr)
        return 2
    try:
        endpoint = wait_endpoint(args.endpoint_file, args.wait) if args.endpoint_file else {
            "url": args.url}
    except TimeoutError as exc:
        print(f"benchmarks.serving.load: {exc}", file=sys.stderr, flush=True)
        return 1
    progress(f"driving {endpoint['url']} ({endpoint.get('backend', 'openai')} server on "
             f"{endpoint.get('host', '?')}), concurrencies "
             f"{','.join(map(str, args.concurrencies))}")
    try:
        result = asyncio.run(drive(args, endpoint))
    except TimeoutError as exc:
        print(f"benchmarks.serving.load: {exc}", file=sys.stderr, flush=True)
        return 1
    status, reasons = verdict(result["levels"])
    labels = dict(kv.split("=", 1) for kv in args.label if "=" in kv)
    params = {**labels, "backend": result["backend"], "model_id": result["model_id"],
              "server_host": endpoint.get("host"), "load_host": socket.gethostname(),
              "server_job_id": endpoint.get("job_id"), "concurrencies": args.concurrencies,
              "requests_per_level": args.requests, "prompt_tokens": args.prompt_tokens,
              "output_tokens": args.output_tokens, "warmup": args.warmup,
              "slo_ttft_ms": args.slo_ttft_ms, "slo_tpot_ms": args.slo_tpot_ms,
              "load_generator": "pctk (benchmarks/serving/load.py, aiohttp)",
              "tensor_parallel": endpoint.get("tensor_parallel"),
              "server_device": endpoint.get("device"),
              "price_usd_per_hour": args.price_usd_per_hour}
    rec = new_record("serving", params=params,
                     metrics={"levels": result["levels"],
                              "slo": {"ttft_ms": args.slo_ttft_ms, "tpot_ms": args.slo_tpot_ms}},
                     status=status, reasons=reasons)
    rec["cluster"]["hosts"] = [h for h in (endpoint.get("host"), socket.gethostname()) if h]
    rec["cluster"]["nodes"] = len(set(rec["cluster"]["hosts"]))
    for reason in reasons:
        progress(reason)
    if args.out:
        write_record(args.out, rec)
        progress(f"record {args.out}")
    else:
        json.dump(rec, sys.stdout, indent=2)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
