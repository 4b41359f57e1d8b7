"""The settings a run gets when its command line leaves them out, without torch.

On a CPU (the twin, CI) the defaults stay the small demo settings: 64 tokens per sequence,
a global batch of 8, no torch.compile, no activation checkpointing.

On GPUs they come from the model shape and the GPU's memory (:func:`gpu_defaults`), through
the memory model ``pctk plan`` uses (:func:`benchmarks.modelmath.memory`):

- sequence length 4096 (or the model's maximum if shorter): long enough for attention's
  share of the FLOPs to be that of real training, short enough that the 8B shape fits on
  80 GiB GPUs without activation checkpointing at a batch of 2;
- per-GPU batch: the largest power of two up to ``TOKENS_PER_GPU // seq_len`` sequences
  whose estimate fits in the usable memory (total less ``HEADROOM``); small steps leave the
  GPU waiting on kernel launches and FSDP's per-block hooks;
- activation checkpointing only when not even one sequence fits without it: recomputing the
  forward costs about a third more compute that MFU does not count;
- torch.compile on: measured on one H200 with the 1b shape at 2 x 4096 tokens, 40.1% MFU
  compiled against 32.1% eager.

An explicit setting always wins; only the others are chosen around it.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.fsdp.config import ModelArgs
from benchmarks.modelmath import GIB, memory, shape_of

CPU_SEQ_LEN = 64
CPU_BATCH_SIZE = 8  # global, split over the ranks
GPU_SEQ_LEN = 4096
TOKENS_PER_GPU = 16_384  # per step: at most this many, as many as fit
HEADROOM = 0.10  # of GPU memory for the CUDA context, NCCL buffers, allocator fragmentation
COMPILE_EVIDENCE = ("measured on one H200, 1b at 2 x 4096 tokens: 40.1% MFU compiled, "
                    "32.1% eager")


@dataclass(frozen=True)
class Choice:
    """The settings of one run on GPUs, each either given or chosen, and why."""

    seq_len: int
    batch_per_gpu: int
    compile: bool
    ac: bool
    fits: bool  # the estimate is within the usable memory
    estimate_gib: float
    usable_gib: float
    gpu_label: str
    chosen: tuple[str, ...]  # the names among seq_len, batch_per_gpu, compile, ac chosen here
    reasons: tuple[str, ...]

    def summary(self) -> str:
        """One line: "defaults chosen for H100 80 GiB: seq 4096, batch 4, compile on, AC off
        (...)"; names what was given on the command line."""
        parts = {"seq_len": f"seq {self.seq_len}", "batch_per_gpu": f"batch {self.batch_per_gpu}",
                 "compile": f"compile {'on' if self.compile else 'off'}",
                 "ac": f"AC {'on' if self.ac else 'off'}"}
        chosen = ", ".join(parts[k] for k in parts if k in self.chosen)
        given = ", ".join(parts[k] for k in parts if k not in self.chosen)
        head = (f"defaults chosen for {self.gpu_label}: {chosen}" if chosen
                else f"no defaults chosen for {self.gpu_label}")
        tail = f"; given: {given}" if given else ""
        return f"{head}{tail} ({'; '.join(self.reasons)})"

    def to_dict(self) -> dict[str, object]:
        return {"gpu": self.gpu_label, "seq_len": self.seq_len,
                "batch_per_gpu": self.batch_per_gpu, "compile": self.compile, "ac": self.ac,
                "chosen": list(self.chosen), "fits": self.fits,
                "estimate_gib": round(self.estimate_gib, 2),
                "usable_gib": round(self.usable_gib, 2), "reasons": list(self.reasons),
                "memory_model": "benchmarks.modelmath (the one pctk plan uses)"}


def _batches(seq_len: int) -> list[int]:
    """Powers of two from TOKENS_PER_GPU // seq_len down to 1."""
    top, out = max(1, TOKENS_PER_GPU // seq_len), []
    b = 1
    while b <= top:
        out.append(b)
        b *= 2
    return out[::-1]


def gpu_defaults(args: ModelArgs, gpu_memory_bytes: float, shard: int, gpu_label: str, *,
                 seq_len: int | None = None, batch_per_gpu: int | None = None,
                 compile: bool | None = None, ac: bool | None = None,
                 headroom: float = HEADROOM) -> Choice:
    """Sequence length, per-GPU batch, compile and activation checkpointing for ``args`` on
    GPUs of ``gpu_memory_bytes`` with the training state sharded over ``shard`` GPUs.

    The keyword settings that are not None were given and are kept as they are.
    """
    if shard < 1 or gpu_memory_bytes <= 0:
        raise ValueError("need a shard size of at least 1 and a positive GPU memory")
    shape = shape_of(args)
    usable = gpu_memory_bytes * (1 - headroom)
    chosen = tuple(name for name, value in (("seq_len", seq_len),
                                            ("batch_per_gpu", batch_per_gpu),
                                            ("compile", compile), ("ac", ac)) if value is None)
    reasons: list[str] = []
    seq = seq_len if seq_len is not None else min(GPU_SEQ_LEN, args.max_seq_len)
    if seq_len is None:
        reasons.append(f"seq {seq}: the GPU default, capped by the model's {args.max_seq_len}")
    do_compile = True if compile is None else compile
    if compile is None:
        reasons.append(f"compile on: {COMPILE_EVIDENCE}")
    batches = [batch_per_gpu] if batch_per_gpu is not None else _batches(seq)
    acs = [ac] if ac is not None else [False, True]
    for use_ac in acs:
        for b in batches:
            need = memory(shape, shard, seq, b).total(use_ac)
            if need <= usable:
                est = f"~{need / GIB:.1f} of {usable / GIB:.1f} GiB usable"
                if batch_per_gpu is None:
                    reasons.append(f"batch {b}: the most sequences up to {TOKENS_PER_GPU:,} "
                                   f"tokens per GPU that fit ({est})")
                if ac is None:
                    reasons.append("AC off: it fits without" if not use_ac else
                                   "AC on: not even one sequence fits without it")
                return Choice(seq, b, do_compile, use_ac, True, need / GIB, usable / GIB,
                              gpu_label, chosen, tuple(reasons))
    # nothing fits: the most frugal of what is left to choose, said plainly
    b = batch_per_gpu if batch_per_gpu is not None else 1
    use_ac = ac if ac is not None else True
    need = memory(shape, shard, seq, b).total(use_ac)
    reasons.append(f"does NOT fit by the memory model: ~{need / GIB:.1f} GiB per GPU against "
                   f"{usable / GIB:.1f} usable; shard over more GPUs or pick a smaller model")
    return Choice(seq, b, do_compile, use_ac, False, need / GIB, usable / GIB, gpu_label,
                  chosen, tuple(reasons))


def cpu_batch_size(world_size: int) -> int:
    """The CPU default global batch: 8, or one sequence per rank if 8 does not split evenly."""
    return CPU_BATCH_SIZE if CPU_BATCH_SIZE % world_size == 0 else world_size
