"""Model shapes and run settings as dataclasses, without torch, so the driver can validate
names cheaply and derive its options from the same fields as the node's command line."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_type_hints


@dataclass(frozen=True)
class ModelArgs:
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    norm_eps: float = 1e-5
    rope_theta: float = 500_000.0
    max_seq_len: int = 8192

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def to_dict(self) -> dict[str, int | float]:
        return asdict(self)


PRESETS: dict[str, ModelArgs] = {
    # CI and the twin: a few hundred thousand parameters
    "tiny": ModelArgs(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=256, vocab_size=512,
                      max_seq_len=1024),
    # still CPU-friendly, big enough for the step time to dwarf the launch overhead
    "small": ModelArgs(dim=512, n_layers=8, n_heads=8, n_kv_heads=4, ffn_dim=1536,
                       vocab_size=32_000, max_seq_len=2048),
    # Llama 3.2 1B
    "1b": ModelArgs(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_dim=8192,
                    vocab_size=128_256),
    # Llama 3.1 8B
    "8b": ModelArgs(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14_336,
                    vocab_size=128_256),
    # Llama 3.1 70B
    "70b": ModelArgs(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim=28_672,
                     vocab_size=128_256),
}


def preset(name: str) -> ModelArgs:
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}"
        ) from None


# --- run settings -------------------------------------------------------------------------
# One dataclass declares every setting of a training run. The node's command line
# (``python -m benchmarks.fsdp.train``), the argv the driver renders into the batch script and
# the options ``pctk bench fsdp`` passes through are all derived from its fields, so a flag's
# name, default, help and choices live here only (torchtitan's "the config is the CLI").

SCHEDULES = ("cosine", "constant")
DEVICES = ("auto", "cuda", "cpu")
DATA_DTYPES = ("uint16", "uint32")
WORKLOADS = ("pretrain", "sft", "rl")
# --workload rl's own defaults (why: the module docstring of benchmarks/fsdp/rl.py); the
# Llama shapes keep pre-training's lr, the last one run on GPUs with them
RL_LR = {"tiny": 2e-2, "small": 2e-2}
RL_REWARDED_SHARE = 16  # the default reward band is 1/16 of the vocabulary


def setting(default: Any, help: str, *, flag: str | None = None,
            choices: Sequence[str] | None = None, minimum: int | None = None) -> Any:
    """A field of :class:`TrainConfig` with its command-line spelling in the metadata.

    ``flag`` defaults to ``--field-name``; a bool that defaults to True is spelled as the flag
    that turns it off (``--no-resume``); a bool that defaults to None takes ``--x/--no-x``.
    """
    meta = {"help": help, "flag": flag, "choices": tuple(choices) if choices else None,
            "minimum": minimum}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ParallelConfig:
    hsdp: bool = False  # shard within a node, replicate across nodes
    activation_checkpointing: bool = False
    compile: bool = False
    bf16: bool = True  # ignored on CPU, which trains in fp32
    fp8: bool = False  # float8 linear layers in the blocks (GPUs of sm89 and newer)


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 3e-4
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    warmup_steps: int = 2
    schedule: str = "cosine"
    min_lr_ratio: float = 0.1
    max_grad_norm: float = 1.0


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of one training run, flat, as on the command line."""

    model: str = setting("tiny", "Model shape preset.", choices=tuple(PRESETS))
    workload: str = setting(
        "pretrain", "pretrain: fixed-length next-token steps. sft: chat samples of --data "
        "(JSONL) packed into rows with per-document attention masks, prompts out of the loss; "
        "tokens/s and MFU count real tokens. rl: GRPO-style loop (KV-cache generation of "
        "--rl-group samples per prompt, rule-based reward, group-relative advantages, policy "
        "update), timed per phase.", choices=WORKLOADS)
    data: Path | None = setting(
        None, "Chat JSONL for --workload sft ({\"messages\": [{\"role\", \"content\"}]} or "
        "{\"prompt\", \"completion\"} per line; default: the shipped synthetic set).")
    pack: bool = setting(True, "--workload sft: one sample per row, padded (the baseline "
                         "packing is measured against).", flag="--no-pack")
    rl_group: int = setting(8, "--workload rl: samples generated per prompt (G); the global "
                            "batch counts prompts.", minimum=2)
    rl_prompt_len: int = setting(16, "--workload rl: tokens per (synthetic) prompt.", minimum=1)
    rl_new_tokens: int = setting(16, "--workload rl: tokens generated per sample.", minimum=1)
    rl_updates: int = setting(4, "--workload rl: policy updates (optimizer steps) per batch "
                              "of rollouts; from the second on the ratio clip can engage.",
                              minimum=1)
    rl_target_token: int = setting(
        7, "--workload rl: the rule-based reward is the fraction of generated tokens whose id "
        "is in --rl-target-token .. --rl-target-token + --rl-target-width - 1.", minimum=0)
    rl_target_width: int | None = setting(
        None, "--workload rl: how many token ids the reward counts (default: a sixteenth of "
        "the vocabulary, 32 of tiny's 512; 1: only the target token, too rare for a random "
        "policy to sample in a short run).", minimum=1)
    steps: int = setting(20, "Training steps.", minimum=1)
    batch_size: int | None = setting(
        None, "Global batch, in sequences, split evenly over the ranks (default: 8 on CPUs; "
        "on GPUs chosen from the model shape and the GPU memory).", minimum=1)
    seq_len: int | None = setting(
        None, "Tokens per sequence (default: 64 on CPUs; on GPUs chosen from the model shape "
        "and the GPU memory).", minimum=1)
    seed: int = setting(0, "Seed of the weights and the synthetic data.")
    data_file: Path | None = setting(None, ".pt tensor or raw .bin/.u16/.u32 token ids.")
    data_dtype: str | None = setting(None, "Token id type of a raw data file.",
                                     choices=DATA_DTYPES)
    device: str = setting("auto", "Device to train on.", choices=DEVICES)
    meta_init: bool | None = setting(
        None, "Build on the meta device and initialise the shards (default: above "
        "2B parameters).")
    hsdp: bool = setting(False, "Shard within a node, replicate across nodes.")
    ac: bool | None = setting(
        None, "Activation checkpointing per block (default: off on CPUs; on GPUs only when "
        "the memory model says nothing fits without it).")
    compile: bool | None = setting(
        None, "torch.compile each block and the loss (default: on on GPUs, off on CPUs).")
    fp32: bool = setting(False, "No bf16 mixed precision on GPUs.")
    fp8: bool = setting(False, "float8 matmuls in the blocks' linear layers (torchao's float8 "
                        "training, tensorwise scales; needs an sm89+ GPU: Ada, Hopper, "
                        "Blackwell). MFU is then against the GPU's dense fp8 peak.")
    lr: float | None = setting(None, f"Peak learning rate (default: {OptimConfig.lr:g}; "
                               "--workload rl on the tiny and small shapes: "
                               f"{RL_LR['tiny']:g}).")
    weight_decay: float = setting(OptimConfig.weight_decay, "AdamW weight decay.")
    warmup_steps: int = setting(OptimConfig.warmup_steps, "Linear lr warm-up, in steps.")
    schedule: str = setting(OptimConfig.schedule, "lr schedule after the warm-up.",
                            choices=SCHEDULES)
    max_grad_norm: float = setting(OptimConfig.max_grad_norm, "Gradient clipping norm.")
    ckpt_dir: Path | None = setting(None, "Checkpoint folder; a run resumes from the newest "
                                    "complete checkpoint there.")
    ckpt_every: int = setting(0, "Steps between checkpoints (0: never).")
    ckpt_keep: int = setting(2, "Complete checkpoints to keep.")
    resume: bool = setting(True, "Start afresh even if --ckpt-dir holds a checkpoint.",
                           flag="--no-resume")
    timing_warmup: int = setting(3, "Steps left out of timing.")
    log_every: int = setting(1, "Steps between log lines.", minimum=1)
    peak_tflops: float | None = setting(
        None, "Dense peak per GPU in the training dtype (bf16, or fp32 with --fp32); "
        "default: from the exact GPU name, none for unknown GPUs.")
    out: Path | None = setting(None, "Result record (pctk.result/v1) written by rank 0.")
    probe_matmuls: int = setting(
        0, "256x256 matmuls added to each step's local part, so a rank with a slow CPU or "
        "GPU shows there (adds their time to every step).")
    breakdown_ref_steps: int = setting(
        3, "Forward+backward passes without communication after training, timed as the "
        "step's compute part (0: off; they hold the whole model gathered on every rank).")
    link_probe_mb: float = setting(
        4.0, "MB each rank receives from each ring neighbour after training, timed per "
        "rank (0: off).")

    @property
    def parallel(self) -> ParallelConfig:
        return ParallelConfig(hsdp=self.hsdp, activation_checkpointing=bool(self.ac),
                              compile=bool(self.compile), bf16=not self.fp32, fp8=self.fp8)

    @property
    def optim(self) -> OptimConfig:
        lr = self.lr
        if lr is None:
            own = RL_LR if self.workload == "rl" else {}
            lr = own.get(self.model.lower(), OptimConfig.lr)
        return OptimConfig(lr=lr, weight_decay=self.weight_decay,
                           warmup_steps=self.warmup_steps, schedule=self.schedule,
                           max_grad_norm=self.max_grad_norm)


@dataclass(frozen=True)
class Setting:
    """One field of :class:`TrainConfig` as a command-line option."""

    name: str
    type: type  # str, int, float, bool or Path (None stripped from optional fields)
    default: Any
    flag: str
    help: str
    choices: tuple[str, ...] | None
    minimum: int | None

    @property
    def is_bool(self) -> bool:
        return self.type is bool


def settings() -> dict[str, Setting]:
    """``{field name: Setting}`` of :class:`TrainConfig`, in declaration order."""
    hints = get_type_hints(TrainConfig)
    out = {}
    for f in fields(TrainConfig):
        kinds = [t for t in get_args(hints[f.name]) if t is not type(None)] or [hints[f.name]]
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        out[f.name] = Setting(f.name, kinds[0], f.default, flag, f.metadata["help"],
                              f.metadata["choices"], f.metadata["minimum"])
    return out


def argument_parser(**kwargs: Any) -> argparse.ArgumentParser:
    """The argparse parser of :class:`TrainConfig` (``kwargs`` go to ArgumentParser)."""
    p = argparse.ArgumentParser(**kwargs)
    for s in settings().values():
        if s.is_bool and s.default is None:
            p.add_argument(s.flag, dest=s.name, action=argparse.BooleanOptionalAction,
                           default=None, help=s.help)
        elif s.is_bool:
            p.add_argument(s.flag, dest=s.name, default=s.default, help=s.help,
                           action="store_false" if s.default else "store_true")
        else:
            p.add_argument(s.flag, dest=s.name, type=s.type, default=s.default, help=s.help,
                           choices=list(s.choices) if s.choices else None)
    return p


def parse_config(argv: Sequence[str] | None = None, **kwargs: Any) -> TrainConfig:
    """A :class:`TrainConfig` from the command line; bad values end in ``p.error`` (exit 2)."""
    p = argument_parser(**kwargs)
    ns = p.parse_args(argv)
    for s in settings().values():
        value = getattr(ns, s.name)
        if s.minimum is not None and value is not None and value < s.minimum:
            p.error(f"{s.flag} must be at least {s.minimum}")
    return TrainConfig(**vars(ns))


def to_argv(cfg: TrainConfig, names: Iterable[str]) -> list[str]:
    """The command line that sets the fields ``names`` of ``cfg``, in that order.

    A None value and a bool at its default say nothing; the result parses back to ``cfg``
    for those fields.
    """
    spec = settings()
    argv: list[str] = []
    for name in names:
        s, value = spec[name], getattr(cfg, name)
        if value is None or (s.is_bool and value == s.default):
            continue
        if s.is_bool and s.default is None:
            argv.append(s.flag if value else "--no-" + s.flag.removeprefix("--"))
        elif s.is_bool:
            argv.append(s.flag)
        else:
            argv += [s.flag, str(value)]
    return argv
