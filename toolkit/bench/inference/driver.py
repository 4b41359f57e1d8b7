"""The offline inference benchmark through Slurm, as plain functions that return records.

:func:`plan` turns the command's settings into an :class:`InferenceJob`; :func:`render_sbatch`
writes its batch script (``benchmarks.inference.bench run`` under ``srun``: one process per
node, or one per GPU sharing the model with ``--tensor-parallel``; then ``merge`` on the
batch host); :func:`run` submits it, waits for the job and returns the record.
The GPU's memory bandwidth and peak for the roofline, and the node's price for the cost per
million output tokens, come from the catalog entry of ``--instance-type``.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.fsdp.config import PRESETS
from benchmarks.inference.roofline import tensor_parallel_problem
from benchmarks.modelmath import resident_weight_bytes, shape_of
from benchmarks.record import read_record, write_record
from toolkit import catalog, slurm
from toolkit.bench.jobrun import Ran
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_text
from toolkit.joblog import no_record_error
from toolkit.paths import code_root, new_run_dir
from toolkit.progress import ProgressLines
from toolkit.submit.jobspec import JobSpec, sbatch_header, unset_launcher_variables

REPO = code_root()
MODES = ("offline",)
# (prompt lengths, batch sizes, context, decode steps, output length per sample): the small
# shapes are for CPUs and the twin, a few seconds of measurement
DEFAULTS: dict[str, tuple[str, str, int, int, int]] = {
    "tiny": ("32,128", "1,4", 64, 16, 128),
    "small": ("64,256", "1,8", 128, 32, 256),
}
GPU_DEFAULTS = ("128,512,2048", "1,8,32,64", 512, 64, 1024)


@dataclass(frozen=True)
class InferenceJob:
    """Everything the batch script needs; no Slurm or filesystem access here."""

    nodes: int
    model: str
    run_dir: Path
    gpus_per_node: int = 1  # GPUs requested (GRES) per node; 0 on CPU partitions
    gpus_of_instance: int = 0  # the instance type's GPUs: replicas in the cost figure
    tensor_parallel: int = 1  # processes (GPUs) per node sharing one model
    partition: str | None = None
    prompt_lens: tuple[int, ...] = (128, 512, 2048)
    batch_sizes: tuple[int, ...] = (1, 8, 32, 64)
    context: int = 512
    decode_tokens: int = 64
    samples: int = 0
    output_len: int = 1024
    device: str = "auto"
    cuda_graph: bool = False
    mem_bw_tbps: float | None = None
    peak_tflops: float | None = None
    price_usd_per_hour: float | None = None
    time_limit: str | None = None
    python: str = sys.executable
    repo: Path = REPO

    @property
    def record_path(self) -> Path:
        return self.run_dir / "record.json"

    def run_args(self) -> list[str]:
        args = ["--model", self.model, "--prompt-lens", csv(self.prompt_lens),
                "--batch-sizes", csv(self.batch_sizes), "--context", str(self.context),
                "--decode-tokens", str(self.decode_tokens), "--device", self.device,
                "--parts", str(self.run_dir / "parts")]
        if self.cuda_graph:
            args.append("--cuda-graph")
        if self.tensor_parallel > 1:
            args += ["--tensor-parallel", str(self.tensor_parallel)]
        if self.samples:
            args += ["--samples", str(self.samples), "--output-len", str(self.output_len)]
        if self.mem_bw_tbps:
            args += ["--mem-bw-tbps", str(self.mem_bw_tbps)]
        if self.peak_tflops:
            args += ["--peak-tflops", str(self.peak_tflops)]
        return args

    def merge_args(self) -> list[str]:
        args = ["--parts", str(self.run_dir / "parts"), "--out", str(self.record_path),
                "--gpus-per-node", str(self.gpus_of_instance)]
        if self.price_usd_per_hour:
            args += ["--price-usd-per-hour", str(self.price_usd_per_hour)]
        return args


@dataclass(frozen=True)
class InferenceRun(Ran):
    job: InferenceJob
    job_id: str
    state: str | None = None
    record: dict[str, Any] | None = None

    @property
    def log(self) -> Path:
        return self.job.run_dir / f"slurm-{self.job_id}.out"


def csv(values: tuple[int, ...]) -> str:
    """``(1, 8, 32)`` as the ``1,8,32`` the node side takes."""
    return ",".join(str(v) for v in values)


def parse_ints(text: str, flag: str) -> tuple[int, ...]:
    """``1,8,32`` as positive integers; a one-line error naming ``flag`` otherwise."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise PctkError(f"{flag} {text!r} is not a comma-separated list of integers",
                        f"e.g. {flag} 1,8,32") from None
    if not values or min(values) < 1:
        raise PctkError(f"{flag} {text!r} needs positive integers", f"e.g. {flag} 1,8,32")
    return values


DEFAULT_GPU_MODEL = "1b"
DEFAULT_CPU_MODEL = "tiny"


def default_model(partition: str | None, instance_type: str | None,
                  gpus_per_node: int | None) -> str:
    """The shape when none is named: 1b on GPU nodes, tiny on nodes without GPUs (a 1b prompt
    of 512 tokens takes 18 s on a CPU of the twin). A GPU instance type or a GPU request
    means GPUs; else the partition's nodes as Slurm has them; 1b when Slurm does not say."""
    from toolkit.bench.fsdp.driver import partition_shape

    if instance_type is not None:
        inst = catalog.get(instance_type)
        return DEFAULT_GPU_MODEL if inst.gpus else DEFAULT_CPU_MODEL
    if gpus_per_node is not None:
        return DEFAULT_GPU_MODEL if gpus_per_node > 0 else DEFAULT_CPU_MODEL
    shape = partition_shape(partition)
    return DEFAULT_CPU_MODEL if shape is not None and shape.gpus == 0 else DEFAULT_GPU_MODEL


def plan(*, mode: str, model: str, nodes: int, prompt_lens: str | None,
         batch_sizes: str | None, context: int | None, decode_tokens: int | None, samples: int,
         output_len: int | None,
         partition: str | None, instance_type: str | None, gpus_per_node: int | None,
         device: str, mem_bw_tbps: float | None, peak_tflops: float | None,
         time_limit: str | None, run_dir: Path | None, cuda_graph: bool = False,
         tensor_parallel: int | None = None) -> InferenceJob:
    """The job, validated; bandwidth, peak, GPU count and price from ``instance_type``.

    ``tensor_parallel`` None: 1, or on a GPU instance type the fewest of its GPUs whose
    memory holds the shape's bf16 weights with room for the KV cache (70b on an 80 GiB GPU:
    2); GPUs per node then default to that many."""
    if mode not in MODES:
        raise PctkError(f"--mode {mode!r} is not available", "use --mode offline or serve")
    model = model.lower()
    if model not in PRESETS:
        raise PctkError(f"unknown model preset {model!r}", f"use one of {', '.join(PRESETS)}")
    d = DEFAULTS.get(model, GPU_DEFAULTS)
    prompt_lens, batch_sizes = prompt_lens or d[0], batch_sizes or d[1]
    context, decode_tokens = context or d[2], decode_tokens or d[3]
    output_len = output_len or d[4]
    price, gpus = None, 0
    tp = tensor_parallel
    if instance_type is not None:
        inst = catalog.get(instance_type)
        price, gpus = inst.price_usd_per_hour, inst.gpus
        if inst.accelerator is not None and inst.gpus:
            mem_bw_tbps = mem_bw_tbps or inst.accelerator.mem_bw_tbps
            peak_tflops = peak_tflops or inst.accelerator.peak_bf16_tflops
            if tp is None:
                tp = fewest_gpus(model, inst.accelerator.memory_mib * 2**20, inst.gpus)
    tp = tp or 1
    if gpus_per_node is None:
        gpus_per_node = tp if gpus else 0
    job = InferenceJob(
        nodes=nodes, model=model, run_dir=(run_dir or new_run_dir(f"inference-{model}")).resolve(),
        gpus_per_node=gpus_per_node, gpus_of_instance=gpus, tensor_parallel=tp,
        partition=partition,
        prompt_lens=parse_ints(prompt_lens, "--prompt-lens"),
        batch_sizes=parse_ints(batch_sizes, "--batch-sizes"), context=context,
        decode_tokens=decode_tokens, samples=samples, output_len=output_len, device=device,
        cuda_graph=cuda_graph,
        mem_bw_tbps=mem_bw_tbps, peak_tflops=peak_tflops, price_usd_per_hour=price,
        time_limit=time_limit)
    validate(job)
    return job


def validate(job: InferenceJob) -> None:
    shape = PRESETS[job.model]
    for name in ("nodes",):
        if getattr(job, name) < 1:
            raise PctkError(f"--{name.replace('_', '-')} must be at least 1")
    if job.samples < 0 or job.gpus_per_node < 0:
        raise PctkError("--samples and --gpus-per-node cannot be negative")
    if job.device not in ("auto", "cuda", "cpu"):
        raise PctkError(f"--device {job.device!r} is not auto, cuda or cpu")
    if job.cuda_graph and (job.device == "cpu" or job.gpus_per_node == 0):
        raise PctkError("--cuda-graph needs a GPU", "drop it, or request GPUs (--gpus-per-node)")
    tp = job.tensor_parallel
    if tp < 1:
        raise PctkError(f"--tensor-parallel {tp} must be at least 1")
    if (why := tensor_parallel_problem(shape, tp)) is not None:
        raise PctkError(f"--tensor-parallel {tp}: {why} of {job.model}",
                        "use a size that divides them (1, 2, 4 or 8 for the Llama shapes)")
    if job.gpus_per_node and job.gpus_per_node < tp:
        raise PctkError(f"--tensor-parallel {tp} needs {tp} GPUs per node, not "
                        f"{job.gpus_per_node}", f"request --gpus-per-node {tp} or more")
    if job.gpus_of_instance and tp > job.gpus_of_instance:
        raise PctkError(f"--tensor-parallel {tp}: the instance type has "
                        f"{job.gpus_of_instance} GPUs", "use at most that many")
    longest = max(max(job.prompt_lens), job.context + job.decode_tokens + 2,
                  job.context + job.output_len if job.samples else 0)
    if longest > shape.max_seq_len:
        raise PctkError(f"{longest} tokens exceed the {job.model} shape's context "
                        f"({shape.max_seq_len})",
                        "shorten --prompt-lens, --context, --decode-tokens or --output-len")
    if any(c.isspace() for c in str(job.run_dir)):
        raise PctkError(f"run folder {str(job.run_dir)!r} has whitespace, which #SBATCH lines "
                        "cannot carry", "pick a --run-dir with no whitespace")


def fewest_gpus(model: str, gpu_bytes: int, gpus: int) -> int:
    """The smallest tensor-parallel size (a power of two up to ``gpus`` that divides the
    shape) whose share of the bf16 weights takes at most 80% of one GPU's memory, leaving
    room for the KV cache and activations; ``gpus`` when none does (the node refuses it)."""
    shape = PRESETS[model]
    size = 1
    while size <= gpus:
        if tensor_parallel_problem(shape, size) is None and \
                resident_weight_bytes(shape_of(shape), 2, tp=size) <= 0.8 * gpu_bytes:
            return size
        size *= 2
    return max(gpus, 1)


def job_spec(job: InferenceJob) -> JobSpec:
    return JobSpec(job_name=f"pctk-inference-{job.model}", nodes=job.nodes,
                   ntasks_per_node=job.tensor_parallel,
                   gpus_per_node=job.gpus_per_node or None, partition=job.partition,
                   time=job.time_limit, output=str(job.run_dir / "slurm-%j.out"))


def render_sbatch(job: InferenceJob) -> str:
    """The batch script, shellcheck-clean; paths and arguments quoted."""
    q = shlex.quote
    run_args = " ".join(q(a) for a in job.run_args())
    merge_args = " ".join(q(a) for a in job.merge_args())
    return "\n".join([
        "#!/bin/bash",
        f"# Generated by pctk bench inference: offline engine benchmark, model {job.model}, "
        f"{job.nodes} node(s), "
        + (f"{job.tensor_parallel} processes per node sharing the model (tensor parallel)."
           if job.tensor_parallel > 1 else "one process per node."),
        *sbatch_header(job_spec(job)),
        "set -euo pipefail",
        *unset_launcher_variables(),
        f"cd {q(str(job.repo))}",
        f"export PYTHONPATH={q(str(job.repo))}${{PYTHONPATH:+:${{PYTHONPATH}}}}",
        f"rm -rf {q(str(job.run_dir / 'parts'))}",
        f"srun --kill-on-bad-exit=1 {q(job.python)} -m benchmarks.inference.bench run "
        f"{run_args}",
        f"{q(job.python)} -m benchmarks.inference.bench merge {merge_args}",
    ]) + "\n"


def run(job: InferenceJob, *, wait_for_it: bool = True, timeout: float | None = None,
        quiet: bool = False) -> InferenceRun:
    script = atomic_write_text(job.run_dir / "inference.sbatch", render_sbatch(job))
    job_id = slurm.sbatch([str(script)])
    if not wait_for_it:
        return InferenceRun(job, job_id)
    with ProgressLines("bench inference", quiet=quiet) as progress:
        progress.update(f"job {job_id}: submitted")
        state = slurm.wait_job(job_id, timeout=timeout, on_state=lambda s: progress.update(
            f"job {job_id}: {s}"))
    done = InferenceRun(job, job_id, state)
    if not job.record_path.exists():
        raise no_record_error(job_id, state, done.log)
    rec = read_record(job.record_path)
    if done.log.is_file() and done.log.name not in rec["raw_logs"]:
        rec["raw_logs"] = [*rec["raw_logs"], done.log.name]
        write_record(job.record_path, rec)
    return replace(done, record=rec)


def summary_rows(rec: dict[str, Any]) -> list[tuple[str, str]]:
    p, m = rec["params"], rec["metrics"]
    rows = [("model", f"{p['model']} ({p['n_params_non_embedding'] / 1e6:,.2f}M params "
                      f"without the embedding), {p['dtype']} on {p['device_name']}"
                      + (f" x {p['tensor_parallel']} (tensor parallel)"
                         if p.get("tensor_parallel", 1) > 1 else "")
                      + f", decode {p.get('decode_path', 'eager')}")]
    if p.get("warmup"):
        rows.append(("timing", f"{p['warmup']} warm-up run(s) per prompt length and decode "
                               "batch first, not counted; TTFT the median of "
                               f"{p.get('repeats', '?')} timed run(s); TPOT the mean step "
                               "(tokens/s per sequence = 1000 / TPOT ms), median beside it"))
    for r in m.get("prefill", []):
        rows.append((f"prefill {r['prompt_len']}",
                     f"TTFT {r['ttft_s'] * 1e3:.2f} ms, {r['tokens_per_s']:,.0f} tokens/s"))
    for r in m.get("decode", []):
        median = (f" (median {r['tpot_p50_s'] * 1e3:.2f})"
                  if isinstance(r.get("tpot_p50_s"), float) else "")
        rows.append((f"decode batch {r['batch']}",
                     f"TPOT {r['tpot_s'] * 1e3:.2f} ms{median}, "
                     f"{r['tokens_per_s_per_seq']:,.1f} tokens/s per sequence, "
                     f"{r['tokens_per_s']:,.0f} aggregate, KV cache "
                     f"{r['kv_cache_bytes'] / 2**20:,.1f} MiB"))
    if tt := m.get("test_time"):
        cost = tt.get("usd_per_million_output_tokens")
        rows.append(("test-time compute",
                     f"{tt['samples']} samples x {tt['output_len']} tokens: "
                     f"{tt['tokens_per_s']:,.0f} output tokens/s; "
                     + (f"${cost:,.2f} per million output tokens "
                        f"({tt['replicas_per_node']} replica(s) per node at "
                        f"${tt['price_usd_per_hour']:,.2f}/h)" if cost is not None
                        else "no price (pass --instance-type)")))
    rows.append(("verdict", " ".join([rec["verdict"]["status"], "; ".join(
        rec["verdict"]["reasons"])])))
    return rows
