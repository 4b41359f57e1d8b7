"""REFERENCE, not pctk's benchmark: torchtitan's own trainer on pctk's shape.

    TORCHTITAN_SRC=~/torchtitan python -m benchmarks.reference.torchtitan_peer \\
        --model 1b --batch-size 4 --seq-len 4096 --steps 20 --out titan.json

torchtitan (``pip install torchtitan``; the wheel is pure Python) trains with its Llama 3
model, its FSDP2 + per-block torch.compile (model and loss) and its fused AdamW. This module
is also the torchtitan config registry the run loads (``--module
benchmarks.reference.torchtitan_peer --config pctk_shape``): torchtitan's llama3 "1B" flavor
(the same dim, layers, heads, FFN width and vocabulary as pctk's 1b) with the embedding and
the output projection untied as pctk builds them, SDPA attention, no activation
checkpointing, the batch, length and steps of the command line, compile on.

torchtitan reads text through a tokenizer and a dataset; offline both come from a torchtitan
checkout (``tests/assets/tokenizer`` and the ``c4_test`` set), so the run starts in
``TORCHTITAN_SRC``. Written against torchtitan 0.3.0's config API; another version may need
this file adjusted: the run's log is kept, and a failure is reported, not hidden.

The figures are torchtitan's own log lines (tps, mfu, memory = max reserved), medians over
the steps after ``--timing-warmup``; the record (kind ``fsdp``) says in
``params.implementation`` that it is torchtitan's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ENV_PREFIX = "PCTK_TITAN_"
STEP_LINE = re.compile(r"step:\s*(\d+).*?loss:\s*([-\d.naif]+).*?memory:\s*([\d.]+)GiB.*?"
                       r"tps:\s*([\d,]+).*?tflops:\s*([\d,.]+).*?mfu:\s*([\d.]+|N/A)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def available() -> str | None:
    """Why the torchtitan peer cannot run here, in one line, or None when it can."""
    try:
        importlib.import_module("torchtitan")
    except ImportError:
        return ("torchtitan is not installed (pip install torchtitan, or carry its wheel "
                "and its dependencies to this machine)")
    src = os.environ.get("TORCHTITAN_SRC")
    if not src or not (Path(src) / "tests" / "assets" / "tokenizer").is_dir():
        return ("TORCHTITAN_SRC is not a torchtitan checkout with tests/assets (its tokenizer "
                "and the c4_test data set, needed offline)")
    return None


def pctk_shape() -> Any:
    """torchtitan's Trainer.Config for pctk's shape (read by torchtitan's ConfigManager)."""
    registry = importlib.import_module("torchtitan.models.llama3.config_registry")
    llama3 = importlib.import_module("torchtitan.models.llama3")
    configs = importlib.import_module("torchtitan.config")
    flavor = os.environ.get(ENV_PREFIX + "FLAVOR", "1B")
    spec = llama3.model_registry(flavor, attn_backend="sdpa")
    # untied as pctk builds it: the embedding then needs its own init (a tied flavor skips it)
    embedding = replace(spec.model.tok_embeddings, param_init=llama3._EMBEDDING_INIT)
    spec = replace(spec, model=replace(spec.model, enable_weight_tying=False,
                                       tok_embeddings=embedding))
    base = registry.llama3_8b()
    return replace(
        base, model_spec=spec, hf_assets_path="./tests/assets/tokenizer",
        profiler=replace(base.profiler, enable_profiling=False),
        metrics=replace(base.metrics, enable_tensorboard=False, log_freq=1),
        training=replace(base.training,
                         local_batch_size=int(os.environ[ENV_PREFIX + "BATCH"]),
                         seq_len=int(os.environ[ENV_PREFIX + "SEQ"]),
                         steps=int(os.environ[ENV_PREFIX + "STEPS"])),
        dataloader=replace(base.dataloader, dataset="c4_test"),
        checkpoint=replace(base.checkpoint, enable=False),
        activation_checkpoint=None,
        validator=replace(base.validator, enable=False),
        compile=configs.CompileConfig(enable=True, components=["model", "loss"]),
    )


def parse_log(text: str, warmup: int) -> dict[str, Any]:
    """Medians of torchtitan's step lines after ``warmup`` steps."""
    rows = []
    for line in ANSI.sub("", text).splitlines():
        m = STEP_LINE.search(line)
        if m:
            rows.append((int(m.group(1)), float(m.group(2)), float(m.group(3)),
                         float(m.group(4).replace(",", "")), float(m.group(5).replace(",", "")),
                         None if m.group(6) == "N/A" else float(m.group(6)) / 100))
    timed = [r for r in rows if r[0] > warmup]
    if not timed:
        return {"measured_steps": 0, "steps_logged": len(rows)}
    mfus = [r[5] for r in timed if r[5] is not None]
    return {"measured_steps": len(timed),
            "tokens_per_s_per_gpu": statistics.median(r[3] for r in timed),
            "tflops_per_gpu": statistics.median(r[4] for r in timed),
            "mfu": statistics.median(mfus) if mfus else None,
            "peak_memory_reserved_gib": max(r[2] for r in timed),
            "final_loss": rows[-1][1], "mfu_source": "torchtitan's own log (its peak table)"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.reference.torchtitan_peer",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="1b", choices=["1b", "8b", "70b"])
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=4096)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--timing-warmup", type=int, default=5)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--like", type=Path, default=None,
                   help="an fsdp record: take its model, sequence length and per-GPU batch")
    a = p.parse_args(argv)
    if a.like is not None:
        try:
            like = json.loads(a.like.read_text())["params"]
            a.model, a.seq_len, a.batch_size = (like["model"], int(like["seq_len"]),
                                                int(like["local_batch_size"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            p.error(f"--like {a.like}: not an fsdp record ({exc})")
    why = available()
    if why:
        print(f"torchtitan_peer: skipped: {why}", file=sys.stderr)
        return 3
    titan = importlib.import_module("torchtitan")
    env = {**os.environ, ENV_PREFIX + "FLAVOR": a.model.upper(),
           ENV_PREFIX + "BATCH": str(a.batch_size), ENV_PREFIX + "SEQ": str(a.seq_len),
           ENV_PREFIX + "STEPS": str(a.steps),
           "PYTHONPATH": os.pathsep.join(x for x in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if x)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
           "-m", "torchtitan.train", "--module", "benchmarks.reference.torchtitan_peer",
           "--config", "pctk_shape"]
    print(f"torchtitan_peer: torchtitan {getattr(titan, '__version__', '?')}, model "
          f"{a.model}, {a.batch_size}x{a.seq_len} tokens/step: {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, cwd=os.environ["TORCHTITAN_SRC"], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    print(proc.stdout, flush=True)
    metrics = parse_log(proc.stdout, a.timing_warmup)
    print(f"torchtitan_peer: rc {proc.returncode}, {metrics}", flush=True)
    if proc.returncode != 0 or not metrics.get("measured_steps"):
        return 1
    if a.out is not None:
        from benchmarks import record

        params = {"model": a.model, "implementation": "reference: torchtitan "
                  f"{getattr(titan, '__version__', '?')} trainer, llama3 {a.model.upper()} "
                  "untied, sdpa, compile model+loss, no AC",
                  "global_batch_size": a.batch_size, "local_batch_size": a.batch_size,
                  "seq_len": a.seq_len, "steps": a.steps, "world_size": 1, "nodes": 1,
                  "timing_warmup_steps": a.timing_warmup}
        record.write_record(a.out, record.new_record("fsdp", params=params, metrics=metrics,
                                                     status="PASS", reasons=[]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
