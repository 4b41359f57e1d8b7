"""The FSDP2 training benchmark through Slurm, as plain functions that return records.

:func:`plan` turns the command's settings into an :class:`FsdpJob`; :func:`render_sbatch`
writes its batch script (one task per GPU under ``srun``, or one ``torchrun`` per node with a
c10d rendezvous); :func:`run` submits it through toolkit.slurm, waits for the job and
returns the result record the job's rank 0 wrote. The arguments of ``benchmarks.fsdp.train``
are rendered from :class:`benchmarks.fsdp.config.TrainConfig`, the node's own settings.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.fsdp.chatdata import read_conversations
from benchmarks.fsdp.config import PRESETS, TrainConfig, settings, to_argv
from benchmarks.fsdp.defaults import gpu_defaults
from benchmarks.fsdp.stragglers import compute_straggler, describe_compute
from benchmarks.fsdp.stragglers import describe as describe_stragglers
from benchmarks.record import read_record, write_record
from toolkit import catalog, slurm
from toolkit.bench.jobrun import Ran
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_text, file_kind
from toolkit.joblog import no_record_error
from toolkit.paths import code_root, new_run_dir
from toolkit.progress import ProgressLines
from toolkit.submit.efa import efa_env
from toolkit.submit.jobspec import (
    RDZV_PORT_SHELL,
    JobSpec,
    env_exports,
    sbatch_header,
    unset_launcher_variables,
)

REPO = code_root()
LAUNCHERS = ("srun", "torchrun")
# long sequences only for the real Llama shapes; the small ones are for CPUs and the twin
DEFAULT_SEQ_LEN = {"tiny": 64, "small": 256}
RL_SETTINGS = ("rl_group", "rl_prompt_len", "rl_new_tokens", "rl_updates", "rl_target_token",
               "rl_target_width")
# The TrainConfig fields ``pctk bench fsdp`` and ``bench scaling`` offer as options (the Python
# API, toolkit.api, takes them by the same names), in --help order, and where the driver's
# default or help differs from the node's.
TRAIN_OPTIONS = ("model", "workload", "data", "steps", "seq_len", "ckpt_every", "ac",
                 "compile", "hsdp", "peak_tflops", "probe_matmuls", "lr", *RL_SETTINGS)
DRIVER_DEFAULTS: dict[str, dict[str, Any]] = {
    "model": {"default": None, "help": f"Shape preset: {', '.join(PRESETS)} [8b on GPU nodes, "
              "tiny on nodes without GPUs (the partition's nodes as Slurm has them)]."},
    "steps": {"default": 50},
    "seq_len": {"default": None, "help": "Tokens per sequence (on GPUs chosen on the node from "
                "the shape and the GPU memory; "
                + ", ".join(f"{m} {n}" for m, n in DEFAULT_SEQ_LEN.items()) + ")."},
    "peak_tflops": {"help": "Dense bf16 peak per GPU (default: from --instance-type, else "
                            "from the GPU name on the node)."},
}


def train_settings(**given: Any) -> tuple[TrainConfig, int | None]:
    """The training settings of a run from the :data:`TRAIN_OPTIONS` given by name (a
    command's or a Python caller's), the driver's defaults for the others; and the sequence
    length (None: chosen for the nodes). Another TrainConfig field would not reach the nodes:
    it is refused."""
    spec = settings()
    unknown = sorted(set(given) - set(TRAIN_OPTIONS))
    if unknown:
        raise PctkError(f"unknown training option(s): {', '.join(unknown)}",
                        f"the training options are {', '.join(TRAIN_OPTIONS)}")
    values = {n: DRIVER_DEFAULTS.get(n, {}).get("default", spec[n].default)
              for n in TRAIN_OPTIONS}
    values.update(given)
    seq_len = values.pop("seq_len")
    return TrainConfig(**values), seq_len
# TrainConfig fields every job passes, in this order; checkpoints only when asked for
JOB_SETTINGS = ("model", "steps", "batch_size", "seq_len", "out")
CKPT_SETTINGS = ("ckpt_dir", "ckpt_every")
# TrainConfig fields `pctk bench fsdp` passes through as they are
PASSED_SETTINGS = ("workload", "data", "ac", "compile", "hsdp", "peak_tflops", "lr")
# CPU-sized shapes' row length for --workload sft (most synthetic chat samples fit whole)
SFT_SEQ_LEN = 1024


@dataclass(frozen=True)
class FsdpJob:
    """Everything the batch script needs; no Slurm or filesystem access here."""

    nodes: int
    model: str
    run_dir: Path
    tasks_per_node: int = 8
    gpus_per_node: int = 8
    launcher: str = "srun"
    partition: str | None = None
    steps: int = 50
    batch_per_gpu: int | None = 1  # None: chosen on the node (GPU defaults)
    seq_len: int | None = 8192  # None: chosen on the node (GPU defaults)
    ckpt_every: int = 0
    time_limit: str | None = None
    requeue: bool = True
    python: str = sys.executable
    repo: Path = REPO
    train_flags: list[str] = field(default_factory=list)  # --ac, --compile, --hsdp, ...
    notes: tuple[str, ...] = ()  # comment lines of the batch script
    # the EFA/NCCL environment (toolkit.submit.efa): None means for GPU jobs (the catalog's
    # EFA fact of --instance-type decides when it is given)
    efa: bool | None = None

    @property
    def uses_efa(self) -> bool:
        return self.efa if self.efa is not None else self.gpus_per_node > 0

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node

    @property
    def record_path(self) -> Path:
        return self.run_dir / "record.json"

    def train_config(self) -> TrainConfig:
        return TrainConfig(
            model=self.model, steps=self.steps,
            batch_size=self.batch_per_gpu * self.world_size if self.batch_per_gpu else None,
            seq_len=self.seq_len, out=self.record_path,
            ckpt_dir=self.run_dir / "ckpt" if self.ckpt_every else None,
            ckpt_every=self.ckpt_every)

    def train_args(self) -> list[str]:
        names = JOB_SETTINGS + (CKPT_SETTINGS if self.ckpt_every else ())
        return to_argv(self.train_config(), names) + self.train_flags


@dataclass(frozen=True)
class FsdpRun(Ran):
    """A submitted job; ``state`` and ``record`` only when it was waited for."""

    job: FsdpJob
    job_id: str
    state: str | None = None
    record: dict[str, Any] | None = None

    @property
    def log(self) -> Path:
        return self.job.run_dir / f"slurm-{self.job_id}.out"


DEFAULT_GPU_MODEL = "8b"
DEFAULT_CPU_MODEL = "tiny"
CPU_MEMORY_USE = 0.8  # of a CPU node's memory the ranks may plan to fill


@dataclass(frozen=True)
class NodeShape:
    """The smallest node of a partition as Slurm has it configured (whatever its state)."""

    partition: str
    cpus: int
    memory_mib: int
    gpus: int

    def describe(self) -> str:
        gpus = f"{self.gpus} GPUs" if self.gpus else "no GPU"
        return (f"partition {self.partition}: {self.cpus} CPUs, "
                f"{self.memory_mib / 1024:.0f} GiB, {gpus} per node")


def partition_shape(partition: str | None) -> NodeShape | None:
    """The smallest node of ``partition`` (Slurm's default partition when None); None when
    Slurm does not answer or the partition has no node."""
    if partition is None:
        r = slurm.ask(["sinfo", "-h", "-o", "%P"], timeout=30)
        marked = [p for p in r.stdout.split() if p.endswith("*")] if r.returncode == 0 else []
        if not marked:
            return None
        partition = marked[0].rstrip("*")
    rows = slurm.partition_nodes(partition)
    shapes = [(int(n["cpus"]), int(n["memory"]), slurm.gres_gpus(n["gres"])) for n in rows
              if n["cpus"].isdigit() and n["memory"].isdigit()]
    if not shapes:
        return None
    cpus, mib, gpus = min(shapes, key=lambda s: (s[2], s[1], s[0]))
    return NodeShape(partition, cpus, mib, gpus)


def node_defaults(train: TrainConfig, *, nodes: int, partition: str | None,
                  instance_type: str | None, tasks_per_node: int | None,
                  gpus_per_node: int | None, seq_len: int | None,
                  batch_per_gpu: int | None) -> tuple[TrainConfig, int | None, int | None,
                                                      tuple[str, ...]]:
    """The model, ranks and GPUs per node left out, chosen from the nodes the job will get.

    On nodes without GPUs: the tiny model, one rank per node, no GRES; a model that cannot
    hold its training state in the nodes' memory is refused before anything is submitted,
    with the numbers. On GPU nodes: the 8b shape, one rank per GPU. When Slurm does not
    answer (a script written for later), the GPU defaults. Returns the train settings with
    the model set, the ranks and GPUs per node (None: as before) and notes for the script.
    """
    chosen = train.model
    if instance_type is not None or (chosen and tasks_per_node and gpus_per_node is not None):
        return replace(train, model=(chosen or DEFAULT_GPU_MODEL).lower()), tasks_per_node, \
            gpus_per_node, ()
    shape = partition_shape(partition)
    if shape is None or shape.gpus > 0:
        ranks = tasks_per_node or (shape.gpus if shape else None)
        return replace(train, model=(chosen or DEFAULT_GPU_MODEL).lower()), ranks, \
            gpus_per_node, ()
    model = (chosen or DEFAULT_CPU_MODEL).lower()
    ranks = tasks_per_node or 1
    notes = [f"CPU nodes ({shape.describe()}): model {model}, {ranks} rank(s) per node, no "
             "GPU requested" + ("" if chosen else " (--model, --tasks-per-node to change)")]
    if model in PRESETS:
        need = cpu_state_bytes(model, ranks * nodes, seq_len, batch_per_gpu)
        have = shape.memory_mib * 2**20 * CPU_MEMORY_USE / ranks
        if need > have:
            raise PctkError(
                f"model {model} needs about {need / 2**30:.1f} GiB per rank (fp32 weights, "
                f"gradients and AdamW state sharded over {ranks * nodes} rank(s), plus "
                f"activations) but {shape.describe()} gives each of {ranks} rank(s) "
                f"{have / 2**30:.1f} GiB", f"use --model {DEFAULT_CPU_MODEL} on CPU nodes, "
                "more nodes, or a GPU partition (--partition)")
    return replace(train, model=model), ranks, 0 if gpus_per_node is None else gpus_per_node, \
        tuple(notes)


def cpu_state_bytes(model: str, world: int, seq_len: int | None,
                    batch_per_gpu: int | None) -> float:
    """Bytes one CPU rank holds to train ``model`` sharded over ``world`` ranks (the memory
    model of :mod:`benchmarks.modelmath`, without activation checkpointing)."""
    from benchmarks.modelmath import memory, shape_of

    seq = seq_len or DEFAULT_SEQ_LEN.get(model, 4096)
    return memory(shape_of(PRESETS[model]), world, seq, batch_per_gpu or 1).total(False)


def plan(train: TrainConfig, *, nodes: int, batch_per_gpu: int | None, seq_len: int | None,
         partition: str | None, instance_type: str | None, tasks_per_node: int | None,
         gpus_per_node: int | None, launcher: str, time_limit: str | None,
         run_dir: Path | None) -> FsdpJob:
    """The job for ``train``'s model, steps, checkpoint interval and ``PASSED_SETTINGS``;
    ranks per node and the peak TFLOP/s from ``instance_type`` when given. Validated."""
    if train.model and train.model.lower() not in PRESETS:
        raise PctkError(f"unknown model preset {train.model!r}",
                        f"use one of {', '.join(PRESETS)}")
    train, tasks_per_node, gpus_per_node, node_notes = node_defaults(
        train, nodes=nodes, partition=partition, instance_type=instance_type,
        tasks_per_node=tasks_per_node, gpus_per_node=gpus_per_node, seq_len=seq_len,
        batch_per_gpu=batch_per_gpu)
    model = train.model
    peak, ranks, efa, gpu = train.peak_tflops, tasks_per_node, None, None
    if instance_type is not None:
        inst = catalog.get(instance_type)
        efa = inst.efa_supported
        if inst.gpus and inst.accelerator is not None:
            ranks = ranks or inst.gpus
            peak = peak or inst.accelerator.peak_bf16_tflops
            gpu = (f"{inst.accelerator.model} {inst.accelerator.memory_gib:.0f} GiB",
                   inst.accelerator.memory_mib * 2**20)
    ranks = ranks or 8
    small = model in DEFAULT_SEQ_LEN  # CPU-sized shapes keep fixed small defaults
    if small:
        fallback = SFT_SEQ_LEN if train.workload == "sft" else DEFAULT_SEQ_LEN[model]
        seq_len, batch_per_gpu = seq_len or fallback, batch_per_gpu or 1
    spec = settings()
    rl_given = [spec[n].flag for n in RL_SETTINGS if getattr(train, n) != spec[n].default]
    if rl_given and train.workload != "rl":
        raise PctkError(f"{', '.join(rl_given)}: settings of --workload rl; a {train.workload} "
                        "run does not read them", "add --workload rl, or drop them")
    if train.data is not None and train.workload != "sft":
        # the node reads --data only for SFT: a pre-training or RL run ignored it without a word
        raise PctkError(f"--data is the chat data of --workload sft; a {train.workload} run "
                        "does not read it", "add --workload sft, or drop --data (pre-training "
                        "trains on synthetic tokens, or on a token file given to "
                        "python -m benchmarks.fsdp.train --data-file)")
    if train.data is not None:
        if not train.data.is_file():
            try:  # a FIFO or a folder exists: "no such file" would send the user astray
                raise PctkError(f"--data {train.data}: not a regular file "
                                f"({file_kind(train.data)})", "the nodes read it more than "
                                "once: save the samples to a JSONL file and pass that")
            except OSError:
                raise PctkError(f"--data {train.data}: no such file") from None
        data = train.data.resolve()
        train = replace(train, data=data)  # the node runs in another folder
        if train.workload == "sft":  # checked here, not minutes later on a node
            try:
                read_conversations(data)
            except ValueError as exc:
                raise PctkError(f"--data {exc}", "one conversation per line: {\"messages\": "
                                "[{\"role\", \"content\"}]}, ShareGPT {\"conversations\": "
                                "[{\"from\", \"value\"}]} or {\"prompt\", \"completion\"}") \
                    from None
    job = FsdpJob(
        nodes=nodes, model=model, run_dir=(run_dir or default_run_dir(model)).resolve(),
        tasks_per_node=ranks, gpus_per_node=ranks if gpus_per_node is None else gpus_per_node,
        launcher=launcher, partition=partition, steps=train.steps, batch_per_gpu=batch_per_gpu,
        seq_len=seq_len, ckpt_every=train.ckpt_every, time_limit=time_limit, efa=efa,
        train_flags=to_argv(replace(train, peak_tflops=peak), passed_settings(train))
        # the straggler probe only when asked for: the scripts of other runs stay as they were
        + (to_argv(train, ("probe_matmuls",)) if train.probe_matmuls > 0 else []),
        notes=node_notes + (() if small else gpu_default_notes(
            train, model, seq_len, batch_per_gpu, ranks, nodes, gpu)))
    validate(job)
    return job


def passed_settings(train: TrainConfig) -> tuple[str, ...]:
    """:data:`PASSED_SETTINGS`, and for --workload rl the RL settings given other values
    than the node's defaults."""
    spec = settings()
    rl = [n for n in RL_SETTINGS if train.workload == "rl"
          and getattr(train, n) != spec[n].default]
    return (*PASSED_SETTINGS, *rl)


def gpu_default_notes(train: TrainConfig, model: str, seq_len: int | None,
                      batch_per_gpu: int | None, ranks: int, nodes: int,
                      gpu: tuple[str, int] | None) -> tuple[str, ...]:
    """Comment lines saying what the node will choose for the settings left out (it decides
    from its own GPU's memory; the catalog's figure gives the expectation)."""
    if seq_len and batch_per_gpu and train.compile is not None and train.ac is not None:
        return ()
    lines = ["settings left out are chosen on the node from the model shape and its GPU memory "
             "(benchmarks/fsdp/defaults.py)"]
    if gpu is not None:
        shard = ranks if train.hsdp else ranks * nodes
        choice = gpu_defaults(PRESETS[model], gpu[1], shard, gpu[0], seq_len=seq_len,
                              batch_per_gpu=batch_per_gpu, compile=train.compile, ac=train.ac)
        lines.append("expected from the catalog: " + choice.summary())
    return tuple(lines)


def run(job: FsdpJob, *, wait_for_it: bool = True, timeout: float | None = None,
        quiet: bool = False) -> FsdpRun:
    """Write the script, submit it and, with ``wait_for_it``, wait for the job and return its
    record (the job's log named in it; the command stores it in the results database)."""
    script = atomic_write_text(job.run_dir / "fsdp.sbatch", render_sbatch(job))
    job_id = submit(script)
    if not wait_for_it:
        return FsdpRun(job, job_id)
    state = wait(job_id, timeout, quiet=quiet)
    done = FsdpRun(job, job_id, state)
    if not job.record_path.exists():
        raise no_record_error(job_id, state, done.log)
    rec = read_record(job.record_path)
    if done.log.is_file() and done.log.name not in rec["raw_logs"]:
        rec["raw_logs"] = [*rec["raw_logs"], done.log.name]  # kept with the record when stored
        write_record(job.record_path, rec)
    return replace(done, record=rec)


def validate(job: FsdpJob) -> None:
    if job.model not in PRESETS:
        raise PctkError(f"unknown model preset {job.model!r}",
                        f"use one of {', '.join(PRESETS)}")
    if job.launcher not in LAUNCHERS:
        raise PctkError(f"unknown launcher {job.launcher!r}", f"use {' or '.join(LAUNCHERS)}")
    for name in ("nodes", "tasks_per_node", "steps", "batch_per_gpu", "seq_len"):
        value = getattr(job, name)
        if value is not None and value < 1:
            raise PctkError(f"--{name.replace('_', '-')} must be at least 1")
    if any(c.isspace() for c in str(job.run_dir)):
        raise PctkError(f"run folder {str(job.run_dir)!r} has whitespace, which #SBATCH lines "
                        "cannot carry", "pick a --run-dir with no whitespace")
    if job.gpus_per_node < 0 or job.ckpt_every < 0:
        raise PctkError("--gpus-per-node and --ckpt-every cannot be negative")


def job_spec(job: FsdpJob) -> JobSpec:
    """One torchrun per node, or one srun task per rank; whole nodes when GPUs are used."""
    return JobSpec(
        job_name=f"pctk-fsdp-{job.model}", nodes=job.nodes,
        ntasks_per_node=1 if job.launcher == "torchrun" else job.tasks_per_node,
        gpus_per_node=job.gpus_per_node or None, exclusive=bool(job.gpus_per_node),
        partition=job.partition, time=job.time_limit,
        # a requeued job (preemption, scontrol requeue) resumes from its last checkpoint
        requeue=job.requeue, open_mode="append", output=str(job.run_dir / "slurm-%j.out"))


def render_sbatch(job: FsdpJob) -> str:
    """The batch script, shellcheck-clean; paths and arguments quoted."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"# Generated by pctk bench fsdp: FSDP2 benchmark, model {job.model}, "
        f"{job.nodes} node(s) x {job.tasks_per_node} rank(s), launcher {job.launcher}.",
        *sbatch_header(job_spec(job)),
        *(f"# {note}" for note in job.notes),
        "set -euo pipefail",
        *unset_launcher_variables(),
        f"cd {q(str(job.repo))}",
        f"export PYTHONPATH={q(str(job.repo))}${{PYTHONPATH:+:${{PYTHONPATH}}}}",
        *env_exports(efa_env(job.uses_efa)),
        'echo "pctk-fsdp: job ${SLURM_JOB_ID} restart ${SLURM_RESTART_COUNT:-0} '
        'on ${SLURM_JOB_NODELIST}"',
    ]
    train = " ".join(q(a) for a in job.train_args())
    if job.launcher == "srun":
        lines.append(f"srun --kill-on-bad-exit=1 {q(job.python)} -m benchmarks.fsdp.train "
                     f"{train}")
    else:
        lines += [
            'head_node=$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | head -n 1)',
            f"srun --kill-on-bad-exit=1 --ntasks-per-node=1 {q(job.python)} "
            f"-m torch.distributed.run --nnodes=\"${{SLURM_JOB_NUM_NODES}}\" "
            f"--nproc-per-node={job.tasks_per_node} --rdzv-backend=c10d "
            f"--rdzv-endpoint=\"${{head_node}}:{RDZV_PORT_SHELL}\" --rdzv-id=\"${{SLURM_JOB_ID}}\" "
            f"-m benchmarks.fsdp.train {train}",
        ]
    return "\n".join(lines) + "\n"


def submit(script: Path) -> str:
    return slurm.sbatch([str(script)])


def wait(job_id: str, timeout: float | None, poll: float = 5.0, quiet: bool = False) -> str:
    with ProgressLines("bench fsdp", quiet=quiet) as progress:
        progress.update(f"job {job_id}: submitted")
        return slurm.wait_job(job_id, timeout=timeout, poll=poll, on_state=lambda state:
                              progress.update(f"job {job_id}: {state}"))


def _mfu_basis(m: dict[str, Any]) -> str:
    """What an MFU that is not against the bf16 peak is against: a float8 run's FLOPs all
    count against the dense fp8 peak, though attention and the output head run in bf16."""
    dtype = m.get("mfu_dtype", "bfloat16")
    if m.get("mfu") is None or dtype == "bfloat16":
        return ""
    if dtype == "float8":
        return (" (every FLOP against the float8 dense peak; attention and the output head run "
                "in bf16, so a mixed peak would give more)")
    return f" ({dtype} peak)"


def summary_rows(rec: dict[str, Any]) -> list[tuple[str, str]]:
    p, m = rec["params"], rec["metrics"]

    def num(key: str, fmt: str) -> str:
        value = m.get(key)
        return format(value, fmt) if isinstance(value, int | float) else "-"

    saves = m.get("checkpoint_saves") or []
    load = m.get("checkpoint_load")
    return [
        ("model", f"{p['model']} ({_count(p['n_params'])} params)"),
        ("world", f"{p['world_size']} ranks on {p['nodes']} node(s), mesh {p['mesh']['shape']}"),
        ("batch", f"{p['global_batch_size']} x {p['seq_len']} tokens, {p['param_dtype']}"),
        ("options", f"compile={p['compile']} ac={p['activation_checkpointing']} "
                    f"hsdp={p['hsdp']}"),
        *workload_rows(p, m),
        ("tokens/s per GPU", num("tokens_per_s_per_gpu", ",.0f")),
        ("TFLOPs per GPU", num("tflops_per_gpu", ".1f")),
        ("MFU", num("mfu", ".1%") + _mfu_basis(m)),
        ("step time p50 / p90", f"{num('step_time_p50_s', '.3f')} / "
                                f"{num('step_time_p90_s', '.3f')} s"),
        ("peak memory", _memory_line(m)),
        ("final loss", num("final_loss", ".4f")),
        ("stragglers", _straggler_line(m.get("stragglers"), m.get("breakdown"))),
        ("checkpoint save", f"{saves[-1]['gb_per_s']:.2f} GB/s ({len(saves)} saves)"
                            if saves else "-"),
        ("checkpoint load", f"{load['gb_per_s']:.2f} GB/s (resumed at step {load['step']})"
                            if load else "-"),
        ("verdict", " ".join([rec["verdict"]["status"], *rec["verdict"]["reasons"]])),
    ]


def workload_rows(p: dict[str, Any], m: dict[str, Any]) -> list[tuple[str, str]]:
    """The post-training figures of an sft or rl record (none for pre-training)."""
    workload = p.get("workload", "pretrain")
    w = m.get(workload) or {}
    if workload == "sft":
        mfu = w.get("real_mfu")
        return [("workload", f"sft, {'packed' if w.get('packed') else 'one sample per row'}"),
                ("real tokens/s per GPU", f"{w.get('real_tokens_per_s_per_gpu') or 0:,.0f} "
                 f"(MFU {mfu:.1%})" if mfu is not None else
                 f"{w.get('real_tokens_per_s_per_gpu') or 0:,.0f}"),
                ("padding", f"{w.get('padding_fraction_packed', 0):.1%} packed, "
                            f"{w.get('padding_fraction_unpacked', 0):.1%} one per row")]
    if workload == "rl":
        split = w.get("phase_fraction") or {}
        return [("workload", "rl (GRPO-style)"),
                ("phase split", ", ".join(f"{k} {v:.0%}" for k, v in split.items()) or "-"),
                ("bound by", str(w.get("bound_by", "-"))),
                ("reward", _reward_line(w))]
    return []


def _reward_line(w: dict[str, Any]) -> str:
    """Whether the reward rose, as the node judged it (``rl.learning``); records from before
    that judgement give their last iteration's mean reward."""
    learning = w.get("learning") or {}
    if isinstance(learning.get("summary"), str):
        return learning["summary"]
    return f"final mean {w['rewards'][-1][1]:.3f}" if w.get("rewards") else "-"


def _memory_line(m: dict[str, Any]) -> str:
    """Allocated, and reserved where the allocator has a reserve (CUDA; a CPU run measures
    the process's peak RSS and has none)."""
    def gib(key: str) -> str | None:
        value = m.get(key)
        return f"{value:.2f} GiB" if isinstance(value, int | float) else None

    parts = [f"{gib('peak_memory_gib') or '-'} allocated"]
    if (reserved := gib("peak_memory_reserved_gib")) is not None:
        parts.append(f"{reserved} reserved")
    kind = m.get("peak_memory_kind")
    return ", ".join(parts) + (f" ({kind})" if kind else "")


def _straggler_line(s: dict[str, Any] | None, breakdown: dict[str, Any] | None) -> str:
    """The optimizer-update judgement, and a node whose compute stands out before it (a
    slow rank's cost in FSDP is the others' wait inside the collectives)."""
    slow = compute_straggler(breakdown) if breakdown else None
    line = describe_stragglers(s) if s else "-"
    return f"{describe_compute(slow)}; {line}" if slow else line


def _count(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.2f}M"


def default_run_dir(model: str) -> Path:
    """``<state home>/runs/fsdp-<model>-<stamp>``: shared with the nodes on ParallelCluster."""
    return new_run_dir(f"fsdp-{model}")
