"""Single-GPU MFU check: the 1B shape in bf16, eager and with torch.compile.

    python -m benchmarks.gpu_mfu                 # on a GPU node; about five minutes
    python -m benchmarks.gpu_mfu --dry-run       # print the runs, start nothing
    python -m benchmarks.gpu_mfu --device cpu --model tiny --seq-len 32   # plumbing only

Each variant runs ``benchmarks.fsdp.train`` in its own process (one rank, FSDP over a 1-GPU
mesh, so it is the same code path as a multi-node run) and writes its result record; this
script then prints tokens/s, TFLOPs and MFU side by side. Target on one H100/H200: MFU of
at least 40% with compile. Exit code 0 when every variant meets --target, 1 otherwise, 2 when
there is no GPU or a run fails. ``--device cpu`` runs the same pipeline on the CPU to check
its plumbing: no MFU, no target. Node-side: standard library and torch only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.distenv import local_rendezvous_port

# compile is on by default on GPUs now (benchmarks/fsdp/defaults.py): eager says so
VARIANTS = {"eager": ["--no-compile"], "compile": ["--compile"]}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_mfu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="1b")
    # 8k tokens a step (~74 TFLOP for 1b): long enough steps to keep the GPU busy, and with
    # fp32 AdamW state (24 GB) and fp32 logits (~10 GB) still well inside 80 GB without AC
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=4096)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--timing-warmup", type=int, default=8,
                   help="steps left out of the timing (compilation happens in the first)")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    p.add_argument("--ac", action="store_true", help="activation checkpointing")
    p.add_argument("--peak-tflops", type=float, help="dense bf16 peak (default: by GPU name)")
    p.add_argument("--target", type=float, default=0.40, help="MFU to reach, 0..1")
    p.add_argument("--out-dir", type=Path, help="where records go (default: a temp folder)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: check the pipeline without a GPU (no MFU)")
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    a = p.parse_args(argv)
    if not 0 < a.target <= 1:
        p.error("--target is a fraction between 0 and 1, e.g. 0.4")
    if a.timing_warmup >= a.steps:
        p.error("--timing-warmup must be smaller than --steps")
    return a


def command(a: argparse.Namespace, variant: str, out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "benchmarks.fsdp.train", "--model", a.model, "--device", a.device,
           "--batch-size", str(a.batch_size), "--seq-len", str(a.seq_len),
           "--steps", str(a.steps), "--timing-warmup", str(a.timing_warmup),
           "--log-every", "5", "--out", str(out), *VARIANTS[variant]]
    if a.ac:
        cmd.append("--ac")
    if a.peak_tflops:
        cmd += ["--peak-tflops", str(a.peak_tflops)]
    return cmd


def single_rank_env() -> dict[str, str]:
    port = local_rendezvous_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _gib(value: float | None) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "-"


def report(results: dict[str, dict], target: float | None) -> bool:
    """Print the table; True when every variant reaches ``target`` (None: nothing judged)."""
    print(f"{'variant':<9} {'tokens/s':>10} {'TFLOPs':>8} {'MFU':>7} {'p50 s':>7} "
          f"{'alloc GiB':>9} {'resv GiB':>8}  loss")
    ok = True
    for name, m in results.items():
        mfu = m.get("mfu")
        ok &= mfu is not None and target is not None and mfu >= target
        mfu_text = f"{mfu:.1%}" if mfu is not None else "n/a"
        print(f"{name:<9} {m['tokens_per_s_per_gpu']:>10,.0f} {m['tflops_per_gpu']:>8.1f} "
              f"{mfu_text:>7} {m['step_time_p50_s']:>7.3f} {_gib(m.get('peak_memory_gib')):>9} "
              f"{_gib(m.get('peak_memory_reserved_gib')):>8}  {m['final_loss']:.3f}")
    first = next(iter(results.values()), {})
    if first.get("peak_tflops_source"):
        print(f"MFU: {first.get('mfu_dtype', 'bfloat16')} against {first.get('peak_tflops')} "
              f"TFLOP/s ({first['peak_tflops_source']})")
    if target is None:
        print("no MFU on CPU: pipeline checked, no target judged")
        return True
    print(f"target MFU {target:.0%}: {'met' if ok else 'NOT met'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.dry_run:
        for variant in a.variants:
            out = (a.out_dir or Path("<temp folder>")) / f"record-{variant}.json"
            print(" ".join(command(a, variant, out)))
        return 0
    out_dir = a.out_dir or Path(tempfile.mkdtemp(prefix="pctk-gpu-mfu-"))
    runs = {v: command(a, v, out_dir / f"record-{v}.json") for v in a.variants}
    import torch

    if a.device == "cuda" and not torch.cuda.is_available():
        print("gpu_mfu: no CUDA device here; run it on a GPU node (or --dry-run)",
              file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    print(f"gpu_mfu: {name}, model {a.model}, "
          f"{a.batch_size}x{a.seq_len} tokens/step, records in {out_dir}", flush=True)
    results = {}
    for variant, cmd in runs.items():
        print(f"--- {variant}", flush=True)
        if subprocess.run(cmd, env=single_rank_env(), check=False).returncode != 0:
            print(f"gpu_mfu: the {variant} run failed", file=sys.stderr)
            return 2
        results[variant] = json.loads((out_dir / f"record-{variant}.json").read_text())["metrics"]
    return 0 if report(results, a.target if a.device == "cuda" else None) else 1


if __name__ == "__main__":
    sys.exit(main())
