"""One GPU session's checks in one run, within about eight minutes on one H100/H200.

    python -m benchmarks.gpu_check                  # everything; outputs under $OUT or --out-dir
    python -m benchmarks.gpu_check --dry-run        # print the steps, run nothing

Steps, each with its own time limit, in order, each step's output kept in a log file:

1. ``env``: nvidia-smi, torch, CUDA and NCCL versions, the exact device names.
2. ``health``: the NVML GPU checks of ``benchmarks.health`` against the real GPUs.
3. ``fsdp``: ``benchmarks.fsdp.train`` on one GPU, the 1b shape (``--model``) at its GPU
   defaults (sequence length, batch, compile and AC chosen from the shape and the GPU's
   memory, benchmarks/fsdp/defaults.py), bf16; record ``fsdp.json``.
4. ``breakdown``: the 1b shape on one GPU with the step-time breakdown
   (:mod:`benchmarks.fsdp.breakdown`: CUDA events per part, a communication-free compute
   reference); the parts must add up to the measured step time within 5% on every rank.
5. ``plain``: the reference peer ``benchmarks.reference.plain_loop`` (transformers'
   LlamaForCausalLM, autocast, whole-model compile) with the fsdp run's shape and tokens per
   step; record ``plain.json``.
6. ``fp8``: the fsdp run again with ``--fp8`` (torchao float8 linears; MFU against the fp8
   dense peak); record ``fp8.json``. A GPU below sm89 refuses it in one line: reported.
7. ``torchtitan``: ``benchmarks.reference.torchtitan_peer`` (torchtitan's own trainer) on the
   same shape and tokens per step, when torchtitan is importable and ``TORCHTITAN_SRC`` is a
   checkout (its tokenizer and test data, offline); otherwise skipped with the reason.
8. ``sweep``: ``benchmarks.collectives`` over all GPUs of the node (nccl; timed calls in a CUDA
   graph), then all_reduce again without graphs, to show the launch cost at small sizes.
9. ``nccl_tests``: builds nccl-tests (``NCCL_TESTS_SRC``, a checkout; nothing is downloaded)
   or uses a built ``all_reduce_perf`` (``NCCL_TESTS_BIN`` or PATH), runs it on the same
   GPUs in one process (-g N, -a 1: mean over ranks like the sweep), with and without its own
   CUDA graphs (-G), and compares it with the sweep per size at large sizes.
9. ``inference``: ``benchmarks.inference.bench`` offline, the 1b shape, decode at batch 1
   and 32 after 512 cached tokens (bandwidth and peak from the device name), eager
   (``inference.json``) and replayed from CUDA graphs (``inference-graph.json``); prints the
   fraction of the HBM roofline at each batch for both; then transformers' ``generate`` on the
   same shape and batches (``benchmarks.reference.generate_peer``, ``generate.json``) and the
   ratios of pctk's decode tokens/s to it.
10. ``sft`` and ``rl`` (asked for by name: ``--steps env,fsdp,sft,rl``): packed SFT on the
    shipped chat set at the fsdp run's GPU defaults, its real-token MFU against the fsdp run's
    (target >= 0.90x), and the GRPO-style loop's phase split on the same shape; records
    ``sft.json`` and ``rl.json``.

Figures on one GPU: all_reduce's bus-bandwidth factor 2(n-1)/n is 0 for n = 1, so busbw is 0
in both tools and the comparison is by time and algbw. At the end one table sets the
training runs side by side (tokens/s, TFLOPs, MFU and its peak, peak memory, ratios to the
plain loop) against the targets of one H100/H200: MFU >= 50%, >= 1.10x the plain loop's
tokens/s, peak memory <= 1.05x the plain loop's, >= 1.0x torchtitan's tokens/s (printed, not
part of the exit code); every record it lists is one ``pctk results add`` takes.
Estimated time on one H100/H200: env and health 20 s, each training run 1.5-2 min (most of
it compiling), sweep 1 min, nccl-tests 1 min: within ``--budget-s`` (480); a step that
would start later is skipped and said so. A step that fails or runs out of time
is reported and the next one runs; the exit code is 0 when every step that ran passed, 1
otherwise, 2 for bad arguments. Node-side: standard library and torch only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.distenv import local_rendezvous_port
from benchmarks.vocab import parse_bytes

REPO = Path(__file__).resolve().parent.parent
STEPS = ("env", "health", "fsdp", "breakdown", "plain", "fp8", "torchtitan", "sweep",
         "nccl_tests", "inference", "sft", "rl")
# the post-training runs are asked for by name: --steps env,fsdp,sft,rl
DEFAULT_STEPS = STEPS[:-2]
TRAIN_RECORDS = {"fsdp": "fsdp.json", "plain": "plain.json", "fp8": "fp8.json",
                 "torchtitan": "titan.json"}
TARGETS = {"mfu": 0.50, "vs_plain": 1.10, "memory_vs_plain": 1.05, "vs_torchtitan": 1.0,
           "sft_real_mfu_vs_pretrain": 0.90}
GPU_CHECKS = "gpu_devices,gpu_count,gpu_ecc,gpu_remap,gpu_xid,gpu_throttle,gpu_pcie,gpu_memory"
COMPARE_FROM = 64 << 20  # compare sizes from 64 MiB up: there launch cost is noise


@dataclass
class Step:
    name: str
    commands: list[list[str]]
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = REPO


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", type=Path, default=None,
                   help="where logs and records go (default: $OUT/gpu_check, else ./gpu-check)")
    p.add_argument("--steps", default=",".join(DEFAULT_STEPS),
                   help=f"comma list of {','.join(STEPS)} (default: all but sft,rl)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs to use (default: all visible)")
    p.add_argument("--budget-s", type=float, default=480.0,
                   help="skip steps that would start after this many seconds")
    p.add_argument("--model", default="1b", help="shape of the training runs")
    p.add_argument("--fsdp-steps", type=int, default=15)
    p.add_argument("--fsdp-warmup", type=int, default=5)
    p.add_argument("--max-bytes", default="1G", help="largest sweep and nccl-tests size")
    p.add_argument("--dry-run", action="store_true", help="print the steps only")
    a = p.parse_args(argv)
    steps = [s.strip() for s in a.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown or not steps:
        p.error(f"unknown step(s) {', '.join(unknown) or '(none given)'}; use {','.join(STEPS)}")
    if a.fsdp_warmup >= a.fsdp_steps or a.gpus < 0 or a.budget_s <= 0:
        p.error("need --fsdp-warmup < --fsdp-steps, --gpus >= 0 and --budget-s > 0")
    try:
        parse_bytes(a.max_bytes)
    except ValueError:
        p.error(f"--max-bytes {a.max_bytes!r}: write sizes like 256M or 1G")
    a.steps = steps
    if a.out_dir is None:
        a.out_dir = Path(os.environ["OUT"]) / "gpu_check" if os.environ.get("OUT") \
            else Path("gpu-check")
    a.out_dir = a.out_dir.resolve()  # the steps run from the repository root
    return a


def python_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")
    return env


def torchrun(nprocs: int, module: str, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nprocs}", "-m", module, *args]


def single_rank_env() -> dict[str, str]:
    """One rank of its own (no torchrun, so the train module's own exit code comes back:
    2 is a refusal such as --fp8 below sm89)."""
    port = local_rendezvous_port()
    return {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def plan(a: argparse.Namespace, gpus: int) -> list[Step]:
    """The commands of each chosen step; nothing runs here."""
    out, py = a.out_dir, sys.executable
    timing = ["--steps", str(a.fsdp_steps), "--timing-warmup", str(a.fsdp_warmup)]
    train = ["--model", a.model, *timing, "--log-every", "5"]
    steps = {
        "env": Step("env", [
            ["nvidia-smi"],
            [py, "-c", "import torch; print('torch', torch.__version__, 'cuda', "
                       "torch.version.cuda, 'nccl', torch.cuda.nccl.version() if "
                       "torch.cuda.is_available() else None); "
                       "[print(i, repr(torch.cuda.get_device_name(i))) "
                       "for i in range(torch.cuda.device_count())]"],
        ], 60),
        "health": Step("health", [
            [py, "-m", "benchmarks.health", "--checks", GPU_CHECKS, "--format", "text",
             "--out-dir", str(out / "health")],
        ], 60),
        "fsdp": Step("fsdp", [[py, "-m", "benchmarks.fsdp.train", *train, "--out",
                               str(out / "fsdp.json")]], 150, single_rank_env()),
        "plain": Step("plain", [
            [py, "-m", "benchmarks.reference.plain_loop", "--like", str(out / "fsdp.json"),
             *timing, "--out", str(out / "plain.json")]], 150),
        "fp8": Step("fp8", [[py, "-m", "benchmarks.fsdp.train", *train, "--fp8", "--out",
                             str(out / "fp8.json")]], 150, single_rank_env()),
        "breakdown": Step("breakdown", [
            torchrun(1, "benchmarks.fsdp.train", [
                "--model", "1b", "--device", "cuda", "--batch-size", "2", "--seq-len", "4096",
                "--steps", str(a.fsdp_steps), "--timing-warmup", str(a.fsdp_warmup),
                "--log-every", "5", "--out", str(out / "breakdown.json")]),
            [py, "-m", "benchmarks.fsdp.breakdown", str(out / "breakdown.json"),
             "--tolerance", "0.05"],
        ], 150),
        # packed SFT at the fsdp run's GPU defaults (same sequence length and batch)
        "sft": Step("sft", [[py, "-m", "benchmarks.fsdp.train", *train, "--workload", "sft",
                             "--out", str(out / "sft.json")]], 150, single_rank_env()),
        "rl": Step("rl", [[py, "-m", "benchmarks.fsdp.train", "--model", a.model,
                           "--workload", "rl", "--steps", "6", "--timing-warmup", "2",
                           "--batch-size", "8", "--rl-group", "8", "--rl-prompt-len", "64",
                           "--rl-new-tokens", "128", "--no-compile", "--out",
                           str(out / "rl.json")]], 150, single_rank_env()),
        "sweep": Step("sweep", [
            torchrun(gpus, "benchmarks.collectives", [
                "--backend", "nccl", "--min-bytes", "1K", "--max-bytes", a.max_bytes,
                "--ops", "all_reduce,all_gather,reduce_scatter", "--iters", "20",
                "--warmup", "5", "--out", str(out / "sweep-graph.json")]),
            torchrun(gpus, "benchmarks.collectives", [
                "--backend", "nccl", "--min-bytes", "1K", "--max-bytes", a.max_bytes,
                "--ops", "all_reduce", "--iters", "20", "--warmup", "5",
                "--cuda-graph", "off", "--out", str(out / "sweep-eager.json")]),
        ], 120),
    }
    nccl = nccl_tests_commands(out, gpus, a.max_bytes)
    if nccl:
        libs = os.pathsep.join(x for x in (str(out / "nccl-tests-build" / "nccl" / "lib"),
                                            os.environ.get("LD_LIBRARY_PATH")) if x)
        steps["nccl_tests"] = Step("nccl_tests", nccl, 180, {"LD_LIBRARY_PATH": libs})
    infer = []
    for name, graph in (("inference", []), ("inference-graph", ["--cuda-graph"])):
        parts = str(out / f"{name}-parts")
        infer += [[py, "-m", "benchmarks.inference.bench", "run", "--model", "1b",
                   "--prompt-lens", "512,2048", "--batch-sizes", "1,32", "--context", "512",
                   "--decode-tokens", "64", "--device", "cuda", *graph, "--parts", parts],
                  [py, "-m", "benchmarks.inference.bench", "merge", "--parts", parts, "--out",
                   str(out / f"{name}.json")]]
    if skip_reason("plain") is None:  # transformers' generate on the same shape and batches
        infer.append([py, "-m", "benchmarks.reference.generate_peer", "--model", "1b",
                      "--batch-sizes", "1,32", "--context", "512", "--decode-tokens", "64",
                      "--device", "cuda", "--out", str(out / "generate.json")])
    steps["inference"] = Step("inference", infer, 180)
    if skip_reason("plain") is not None:
        del steps["plain"]
    if skip_reason("torchtitan") is None:
        steps["torchtitan"] = Step("torchtitan", [
            [py, "-m", "benchmarks.reference.torchtitan_peer", "--like", str(out / "fsdp.json"),
             *timing, "--out", str(out / "titan.json")]], 180)
    return [steps[name] for name in a.steps if name in steps]


def skip_reason(name: str) -> str | None:
    """Why a step cannot run on this machine at all, or None."""
    if name == "nccl_tests":
        return "set NCCL_TESTS_SRC (with nvcc) or NCCL_TESTS_BIN, or put all_reduce_perf on PATH"
    if name == "plain" and importlib.util.find_spec("transformers") is None:
        return ("transformers is not installed (pip install 'pctk[reference]', or carry its "
                "wheels to this machine)")
    if name == "torchtitan":
        from benchmarks.reference import torchtitan_peer

        return torchtitan_peer.available()
    return None


def nccl_tests_commands(out: Path, gpus: int, max_bytes: str) -> list[list[str]]:
    """Build (if a checkout is given) and run all_reduce_perf; [] when neither is here."""
    run = ["-b", "1K", "-e", max_bytes, "-f", "2", "-g", str(gpus), "-n", "20", "-w", "5",
           "-a", "1", "-c", "1"]
    src = os.environ.get("NCCL_TESTS_SRC")
    binary = os.environ.get("NCCL_TESTS_BIN")
    perf = (Path(binary) / "all_reduce_perf") if binary else None
    commands: list[list[str]] = []
    if src and shutil.which("nvcc"):
        build = out / "nccl-tests-build"
        commands.append(["bash", str(REPO / "benchmarks" / "gpu_check_build.sh"), src,
                         str(build)])
        perf = build / "all_reduce_perf"
    elif perf is None and shutil.which("all_reduce_perf"):
        perf = Path(str(shutil.which("all_reduce_perf")))
    if perf is None:
        return []
    commands.append([str(perf), *run, "-G", "0"])
    commands.append([str(perf), *run, "-G", "1"])
    return commands


def run_step(step: Step, out: Path, deadline: float) -> dict[str, Any]:
    log = out / f"{step.name}.log"
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    with log.open("w") as fh:
        for cmd in step.commands:
            left = min(step.timeout_s - (time.monotonic() - started), deadline - time.monotonic())
            if left <= 5:
                results.append({"cmd": cmd, "rc": None, "why": "out of time"})
                break
            fh.write(f"$ {' '.join(cmd)}\n")
            fh.flush()
            try:
                proc = subprocess.run(cmd, cwd=step.cwd, env={**python_env(), **step.env},
                                      stdout=fh, stderr=subprocess.STDOUT, timeout=left,
                                      check=False)
                results.append({"cmd": cmd, "rc": proc.returncode})
            except subprocess.TimeoutExpired:
                results.append({"cmd": cmd, "rc": None, "why": f"timed out after {left:.0f}s"})
            except OSError as exc:
                results.append({"cmd": cmd, "rc": None, "why": str(exc)})
            if "why" in results[-1]:
                fh.write(f"gpu_check: {results[-1]['why']}\n")
    ok = all(r["rc"] == 0 for r in results) and bool(results)
    if step.name == "health":  # Nagios codes: 1 is a WARNING, not a failure of the run
        ok = bool(results) and all(r["rc"] in (0, 1) for r in results)
    if step.name == "fp8" and results and results[-1]["rc"] == 2:  # refused below sm89
        ok = True
        results[-1]["why"] = "refused: see fp8.log (needs sm89+ and torchao)"
    return {"step": step.name, "ok": ok, "seconds": round(time.monotonic() - started, 1),
            "log": str(log), "commands": results}


def perf_rows(text: str) -> dict[int, dict[str, dict[str, float]]]:
    """``{size: {"out_of_place": figures, "in_place": figures}}`` from an nccl-tests table:
    the last eight columns are time, algbw, busbw, #wrong for each placement."""
    rows: dict[int, dict[str, dict[str, float]]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 12 or not parts[0].isdigit():
            continue
        try:
            oop = [float(x) for x in parts[-8:-5]]
            inp = [float(x) for x in parts[-4:-1]]
        except ValueError:
            continue
        keys = ("time_us", "algbw_gbps", "busbw_gbps")
        rows[int(parts[0])] = {"out_of_place": dict(zip(keys, oop, strict=True)),
                               "in_place": dict(zip(keys, inp, strict=True))}
    return rows


def sweep_rows(record: Path) -> dict[int, dict[str, float]]:
    if not record.is_file():
        return {}
    blocks = json.loads(record.read_text())["metrics"]["collectives"]
    block = next((b for b in blocks if b["collective"] == "all_reduce"), None)
    if block is None:
        return {}
    return {r["size_bytes"]: r["in_place"] for r in block["rows"] if r.get("in_place")}


def compare(out: Path, gpus: int) -> list[str]:
    """Sweep vs nccl-tests per size at large sizes, each side's timing stated."""
    log = out / "nccl_tests.log"
    if not log.is_file():
        return ["no nccl-tests output: nothing compared"]
    perf: dict[bool, dict[int, dict[str, dict[str, float]]]] = {}
    for run in log.read_text(errors="replace").split("$ ")[1:]:
        head = run.splitlines()[0]
        if "all_reduce_perf" in head:
            perf["-G 1" in head] = perf_rows(run)
    plain, graphed = perf.get(False, {}), perf.get(True, {})
    graph, eager = sweep_rows(out / "sweep-graph.json"), sweep_rows(out / "sweep-eager.json")
    nan = {"time_us": float("nan"), "algbw_gbps": float("nan")}
    lines = ["all_reduce, time per call in us, mean over ranks (sweep --time-reduction mean, "
             "nccl-tests -a 1); torch's all_reduce is in place, so in-place columns compare"]
    if gpus == 1:
        lines.append("one GPU: an in-place all_reduce of one rank moves no data, so these "
                     "columns measure launch cost only; nccl-tests' out-of-place is a copy")
    lines.append(f"{'size':>11} {'sweep graph':>11} {'sweep eager':>11} {'nccl-tests':>10} "
                 f"{'nccl -G':>8} {'nccl oop':>9} {'algbw sweep/nccl':>16}")
    for size in sorted(set(graph) & set(plain)):
        if size < COMPARE_FROM:
            continue
        mine, theirs = graph[size], plain[size]["in_place"]
        ratio = (mine["algbw_gbps"] / theirs["algbw_gbps"] if theirs["algbw_gbps"]
                 else float("nan"))
        g = graphed.get(size, {}).get("in_place", nan)
        lines.append(f"{size:>11} {mine['time_us']:>11.1f} "
                     f"{eager.get(size, nan)['time_us']:>11.1f} {theirs['time_us']:>10.1f} "
                     f"{g['time_us']:>8.1f} {plain[size]['out_of_place']['time_us']:>9.1f} "
                     f"{ratio:>16.3f}")
    if not any(size >= COMPARE_FROM for size in set(graph) & set(plain)):
        lines.append(f"no size from {COMPARE_FROM} bytes up in both")
    return lines


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    gpus = a.gpus or _visible_gpus()
    steps = plan(a, max(1, gpus))
    if a.dry_run:
        for step in steps:
            for cmd in step.commands:
                print(f"[{step.name}, {step.timeout_s:.0f}s] {' '.join(cmd)}")
        for name in skipped(a.steps, steps):
            print(f"[{name}] skipped: {skip_reason(name)}")
        return 0
    a.out_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + a.budget_s
    summary = [run_step(step, a.out_dir, deadline) for step in steps]
    for s in summary:
        notes = "; ".join(c["why"] for c in s["commands"] if c.get("why"))
        print(f"{'ok  ' if s['ok'] else 'FAIL'} {s['step']:<11} {s['seconds']:>6.1f}s  {s['log']}"
              + (f"  ({notes})" if notes else ""))
    for name in skipped(a.steps, steps):
        print(f"skip {name}: {skip_reason(name)}")
    for name, path in (("eager", "inference.json"), ("CUDA graph", "inference-graph.json")):
        if (roof := _inference_lines(a.out_dir / path)):
            print(f"--- inference, 1b decode ({name}) against the HBM roofline\n"
                  + "\n".join(roof))
    if (side := inference_side_by_side(a.out_dir)):
        print("--- inference, decode tokens/s: pctk against transformers' generate\n"
              + "\n".join(side))
    for name in ("breakdown.log", "health.log"):
        path = a.out_dir / name
        if path.is_file():
            print(f"--- {name} (tail)\n" + "\n".join(path.read_text().splitlines()[-12:]))
    comparison = compare(a.out_dir, max(1, gpus))
    print("--- sweep vs nccl-tests\n" + "\n".join(comparison))
    table, ratios = training_table(a.out_dir)
    print("--- training, one GPU, same shape and tokens per step\n" + "\n".join(table))
    records = sorted(str(p) for p in a.out_dir.glob("*.json") if p.name != "summary.json")
    records += sorted(str(p) for p in (a.out_dir / "health").glob("*.json"))
    if records:
        print("store the records: pctk results add " + " ".join(records))
    (a.out_dir / "summary.json").write_text(json.dumps(
        {"steps": summary, "comparison": comparison, "gpus": gpus, "training": table,
         "ratios": ratios, "targets": TARGETS, "records": records}, indent=1))
    return 0 if all(s["ok"] for s in summary) else 1


def _inference_lines(path: Path) -> list[str]:
    """The inference record's verdict lines: the fraction of each bound reached."""
    try:
        return list(json.loads(path.read_text())["verdict"]["reasons"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def inference_side_by_side(out: Path) -> list[str]:
    """Per batch: pctk's decode tokens/s eager and graphed, generate's, and the ratios."""
    runs: dict[str, dict[int, float]] = {}
    for label, name in (("eager", "inference.json"), ("graph", "inference-graph.json"),
                        ("generate", "generate.json")):
        metrics = _metrics(out / name) or {}
        runs[label] = {r["batch"]: r["tokens_per_s"] for r in metrics.get("decode", [])
                       if isinstance(r, dict) and "batch" in r and "tokens_per_s" in r}
    ref = runs["generate"]
    if not ref:
        return []
    lines = [f"{'batch':>5} {'eager':>10} {'graph':>10} {'generate':>10} {'eager/gen':>9} "
             f"{'graph/gen':>9}"]
    nan = float("nan")
    for batch in sorted(ref):
        eager, graph = runs["eager"].get(batch, nan), runs["graph"].get(batch, nan)
        lines.append(f"{batch:>5} {eager:>10,.0f} {graph:>10,.0f} {ref[batch]:>10,.0f} "
                     f"{eager / ref[batch]:>9.2f} {graph / ref[batch]:>9.2f}")
    return lines


def skipped(wanted: list[str], planned: list[Step]) -> list[str]:
    names = {s.name for s in planned}
    return [n for n in wanted if n not in names]


def _metrics(path: Path) -> dict[str, Any] | None:
    try:
        rec = json.loads(path.read_text())
        return {**rec["metrics"], "_params": rec["params"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _ratio(a: Any, b: Any) -> float | None:
    return a / b if isinstance(a, int | float) and isinstance(b, int | float) and b else None


def training_table(out: Path) -> tuple[list[str], dict[str, float | None]]:
    """The training runs side by side from their records, the ratios, the targets."""
    runs = {name: m for name, file in TRAIN_RECORDS.items()
            if (m := _metrics(out / file)) is not None}
    if not runs:
        return ["no training record: nothing to compare"], {}

    def mem(m: dict[str, Any]) -> Any:  # allocated where measured (torchtitan: reserved)
        return m.get("peak_memory_gib") or m.get("peak_memory_reserved_gib")

    def fmt(v: Any, spec: str) -> str:
        return format(v, spec) if isinstance(v, int | float) else "-"

    plain, pctk = runs.get("plain"), runs.get("fsdp")
    lines = [f"{'run':<11} {'tokens/step':>11} {'tokens/s':>10} {'TFLOPs':>7} {'MFU':>6} "
             f"{'peak':>9} {'mem GiB':>8} {'vs plain':>8}  settings"]
    for name, m in runs.items():
        p = m["_params"]
        tokens = (p.get("local_batch_size") or 0) * (p.get("seq_len") or 0)
        vs = _ratio(m.get("tokens_per_s_per_gpu"), plain and plain.get("tokens_per_s_per_gpu"))
        short = {"bfloat16": "bf16", "float8": "fp8", "float32": "fp32"}
        peak = f"{short.get(m.get('mfu_dtype', ''), '')} {fmt(m.get('peak_tflops'), '.0f')}"
        settings = (f"seq {p.get('seq_len')} x {p.get('local_batch_size')}, compile "
                    f"{p.get('compile')}, AC {p.get('activation_checkpointing')}")
        lines.append(f"{name:<11} {tokens:>11,} {fmt(m.get('tokens_per_s_per_gpu'), ',.0f'):>10} "
                     f"{fmt(m.get('tflops_per_gpu'), '.1f'):>7} {fmt(m.get('mfu'), '.1%'):>6} "
                     f"{peak:>9} {fmt(mem(m), '.1f'):>8} {fmt(vs, '.3f'):>8}  {settings}")
    ratios = {
        "pctk_mfu": pctk.get("mfu") if pctk else None,
        "pctk_vs_plain_tokens": _ratio(pctk and pctk.get("tokens_per_s_per_gpu"),
                                       plain and plain.get("tokens_per_s_per_gpu")),
        "pctk_vs_plain_memory": _ratio(pctk and mem(pctk), plain and mem(plain)),
        "pctk_vs_torchtitan_tokens": _ratio(
            pctk and pctk.get("tokens_per_s_per_gpu"),
            runs.get("torchtitan", {}).get("tokens_per_s_per_gpu")),
        "fp8_vs_bf16_tokens": _ratio(runs.get("fp8", {}).get("tokens_per_s_per_gpu"),
                                     pctk and pctk.get("tokens_per_s_per_gpu")),
    }
    checks = [("MFU", "pctk_mfu", ">=", TARGETS["mfu"], ".1%"),
              ("pctk/plain tokens/s", "pctk_vs_plain_tokens", ">=", TARGETS["vs_plain"], ".3f"),
              ("pctk/plain peak memory", "pctk_vs_plain_memory", "<=",
               TARGETS["memory_vs_plain"], ".3f"),
              ("pctk/torchtitan tokens/s", "pctk_vs_torchtitan_tokens", ">=",
               TARGETS["vs_torchtitan"], ".3f"),
              ("fp8/bf16 tokens/s", "fp8_vs_bf16_tokens", None, None, ".3f")]
    for label, key, op, target, spec in checks:
        value = ratios[key]
        if value is None:
            lines.append(f"{label}: not measured")
        elif op is None or target is None:
            lines.append(f"{label}: {value:{spec}}")
        else:
            met = value >= target if op == ">=" else value <= target
            lines.append(f"{label}: {value:{spec}} (target {op} {target:{spec}}: "
                         f"{'met' if met else 'NOT met'})")
    lines += post_training_lines(out, pctk, ratios)
    if pctk and pctk["_params"].get("defaults"):
        lines.append("pctk " + str(pctk["_params"]["defaults"].get("gpu")) + ": chosen "
                     + ", ".join(pctk["_params"]["defaults"].get("chosen", [])))
    return lines, ratios


def post_training_lines(out: Path, pctk: dict[str, Any] | None,
                        ratios: dict[str, float | None]) -> list[str]:
    """Packed SFT's real-token MFU against the fsdp run's MFU; the RL loop's phase split."""
    lines = []
    sft = (_metrics(out / "sft.json") or {}).get("sft")
    if isinstance(sft, dict):
        ratio = _ratio(sft.get("real_mfu"), pctk and pctk.get("mfu"))
        ratios["sft_real_mfu_vs_pretrain"] = ratio
        target = TARGETS["sft_real_mfu_vs_pretrain"]
        mfu = sft.get("real_mfu")
        lines.append(f"sft real-token MFU {mfu:.1%}" if isinstance(mfu, float) else
                     "sft real-token MFU: not measured")
        lines.append(f"sft padding {sft.get('padding_fraction_packed', 0):.1%} packed, "
                     f"{sft.get('padding_fraction_unpacked', 0):.1%} one sample per row")
        lines.append("sft/pretrain MFU: " + (
            f"{ratio:.3f} (target >= {target:.3f}: {'met' if ratio >= target else 'NOT met'})"
            if ratio is not None else "not measured"))
    rl = (_metrics(out / "rl.json") or {}).get("rl")
    if isinstance(rl, dict) and rl.get("phase_fraction"):
        split = ", ".join(f"{k} {v:.0%}" for k, v in rl["phase_fraction"].items())
        lines.append(f"rl phase split: {split}; bound by {rl.get('bound_by')}; generation "
                     f"{rl.get('generation_tokens_per_s_per_gpu') or 0:,.0f} tok/s, training "
                     f"{rl.get('training_tokens_per_s_per_gpu') or 0:,.0f} tok/s, sync "
                     f"{rl.get('weight_sync_gb_per_s') or 0:.1f} GB/s")
    return lines


def _visible_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
