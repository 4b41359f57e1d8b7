"""Where each training step's time goes, measured on every rank, and each rank's incoming link.

Each timed step (after the warm-up) is cut at the same points on every rank into parts, in
seconds (the record keeps every rank's mean over the timed steps, so the parts add up):

- ``fwd_bwd``: forward, loss and backward as trained, FSDP's all-gathers and gradient
  reduce-scatters included;
- ``compute``: the same forward and backward without any communication, measured after
  training as the mean of extra passes over the last batch (``--breakdown-ref-steps`` of them
  and at least :data:`REFERENCE_WINDOW_S` seconds' worth), with
  every FSDP module's parameters kept gathered and gradient sync off (FSDP2's
  ``set_reshard_after_forward/backward(False)``, ``set_requires_gradient_sync(False)``); no
  optimizer step follows them, so training is unchanged;
- ``exposed_comm``: ``fwd_bwd - compute`` (at least 0): the communication the compute did not
  hide, including waiting inside a collective for a slower rank or link;
- ``optimizer``: AdamW, zero_grad, the lr scheduler (and ``--probe-matmuls``);
- ``sync``: gradient clipping (its norm all-reduce) and the end-of-step loss all-reduce, where
  ranks that finished early wait for the last one;
- ``data``: building this rank's rows of the next batch and copying them to the device;
- ``checkpoint``: the seconds of the checkpoint saves made during timed steps, per timed step;
- ``step``: the whole loop iteration on the host's wall clock, measured on its own: the parts
  above add up to it, apart from logging.

On a GPU, ``fwd_bwd``, ``optimizer`` and ``sync`` (and ``compute``) come from CUDA events on
the current stream; ``data``, ``checkpoint`` and ``step`` from the host's wall clock. On a CPU
every part is a wall clock (``time.perf_counter``).

The link probe: each rank in turn receives ``--link-probe-mb`` from each of its two ring
neighbours while the others wait (point to point over the training mesh); a rank's figure is
its slower neighbour's GB/s, each the best of three tries. A slow link into one node shows as
that node's low figure; collectives only show that *some* link is slow.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch
import torch.distributed as dist

PARTS = ("compute", "exposed_comm", "optimizer", "sync", "data", "checkpoint")
MEASURED_BY = {
    "fwd_bwd": "forward+loss+backward as trained (communication included)",
    "compute": "forward+backward with parameters kept gathered and gradient sync off, "
               "after training (no communication)",
    "exposed_comm": "fwd_bwd - compute, at least 0 (collectives the compute did not hide, "
                    "waits for slower ranks inside them)",
    "optimizer": "AdamW step, zero_grad, lr scheduler (and probe matmuls)",
    "sync": "gradient clipping (norm all-reduce) and the end-of-step loss all-reduce",
    "data": "building this rank's rows of the next batch and copying them to the device",
    "checkpoint": "checkpoint saves during timed steps, per timed step",
    "step": "the loop iteration on the host wall clock, measured on its own",
}
PROBE_REPEATS = 3


class PhaseClock:
    """Marks on the device's timeline: CUDA events on a GPU, perf_counter on a CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list[Any] = []

    @property
    def how(self) -> str:
        return "cuda events" if self.cuda else "wall clock (perf_counter)"

    def start(self) -> None:
        self.marks = [self._now()]

    def mark(self) -> None:
        self.marks.append(self._now())

    def _now(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def spans(self) -> list[float]:
        """Seconds between consecutive marks (on a GPU, call after the stream is synced)."""
        pairs = zip(self.marks, self.marks[1:], strict=False)
        if self.cuda:
            for event in self.marks[-1:]:
                event.synchronize()
            return [a.elapsed_time(b) / 1000 for a, b in pairs]
        return [b - a for a, b in pairs]


class StepParts:
    """This rank's per-step figures, summed over the timed steps."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = dict.fromkeys(
            ("fwd_bwd", "optimizer", "sync", "data", "checkpoint", "step"), 0.0)
        self.steps = 0

    def add(self, **seconds: float) -> None:
        for key, value in seconds.items():
            self.sums[key] += value

    def count(self) -> None:
        self.steps += 1

    def means(self, compute_s: float | None) -> dict[str, float]:
        n = max(1, self.steps)
        out = {k: v / n for k, v in self.sums.items()}
        compute = out["fwd_bwd"] if compute_s is None else min(compute_s, out["fwd_bwd"])
        out["compute"] = compute
        out["exposed_comm"] = max(0.0, out["fwd_bwd"] - compute)
        return out


def fsdp_modules(model: torch.nn.Module) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def fits_gathered(n_params: int, device: torch.device) -> bool:
    """Whether the whole model, gathered in bf16 with fp32 gradients (6 bytes a parameter),
    takes at most half of the GPU's memory (always on a CPU)."""
    if device.type != "cuda":
        return True
    return n_params * 6 <= 0.5 * torch.cuda.get_device_properties(device).total_memory


# The compute reference runs for at least this long (and at least --breakdown-ref-steps
# passes), and its figure is the mean pass: a node slowed in bursts (a CPU quota runs it at
# full speed for part of each 100 ms period and stalls it for the rest, as a power cap
# or thermal throttle on a GPU also comes and goes) shows in a mean over several periods;
# the median of three passes of a few ms each, which fit between two stalls, showed nothing
# the figure drops its slowest pass when there are enough (one pass that met a hiccup, such
# as a wait left over from the parameters' gather, is not the node's speed); short passes
# run until there are that many, within a second
REFERENCE_WINDOW_S = 0.3
REFERENCE_MAX_PASSES = 200
REFERENCE_TRIMMED_PASSES = 8


def compute_reference(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor],
                      passes: int, device: torch.device) -> float | None:
    """Mean seconds of a forward+backward with no communication (module docstring), over
    at least ``passes`` passes and :data:`REFERENCE_WINDOW_S`, less the slowest pass of
    :data:`REFERENCE_TRIMMED_PASSES` or more.

    Collective across the mesh: the first pass gathers every module's parameters once (the
    timed passes communicate nothing, so ranks may run different numbers of them). Leaves
    the model resharded with no gradients."""
    import torch.nn.functional as F

    mods = fsdp_modules(model)
    if passes < 1 or not all(hasattr(m, "set_reshard_after_forward") for m in mods):
        return None  # off, or a torch whose FSDP2 cannot keep parameters gathered
    for m in mods:
        m.set_reshard_after_forward(False, recurse=False)
        m.set_reshard_after_backward(False, recurse=False)
        m.set_requires_gradient_sync(False, recurse=False)
    inputs, targets = batch
    clock = PhaseClock(device)
    times: list[float] = []
    try:
        i = 0  # the first pass gathers the parameters: not timed
        while i <= passes or (len(times) < REFERENCE_MAX_PASSES and (
                sum(times) < REFERENCE_WINDOW_S
                or (len(times) < REFERENCE_TRIMMED_PASSES and sum(times) < 1.0))):
            clock.start()
            logits = model(inputs)
            F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten()).backward()
            clock.mark()
            if i:
                times.append(clock.spans()[0])
            elif device.type == "cuda":
                torch.cuda.synchronize(device)
            i += 1
    finally:
        for m in mods:
            m.reshard()
        model.zero_grad(set_to_none=True)
        for m in mods:
            m.set_requires_gradient_sync(True, recurse=False)
            m.set_reshard_after_backward(True, recurse=False)
    kept = sorted(times)[:-1] if len(times) >= REFERENCE_TRIMMED_PASSES else times
    return sum(kept) / len(kept)


def link_probe(nbytes: int, mesh: Any, device: torch.device) -> tuple[float | None, str | None]:
    """This rank's slowest incoming GB/s from its two ring neighbours (each the best of
    :data:`PROBE_REPEATS`), or (None, why not).

    Collective across the mesh: every rank must call it with the same arguments."""
    world = dist.get_world_size()
    if nbytes <= 0:
        return None, "off (--link-probe-mb 0)"
    if world < 2:
        return None, "one rank: no link"
    if mesh.ndim != 1 or mesh.size() != world:
        return None, "only on a 1-D mesh over every rank (not with --hsdp)"
    group = mesh.get_group(0)
    rank = dist.get_rank()
    buf = torch.zeros(max(1, nbytes // 4), dtype=torch.float32, device=device)
    best: dict[int, float] = {}  # source rank -> best GB/s received from it
    for _ in range(PROBE_REPEATS):
        for shift in sorted({1, world - 1}):
            for src in range(world):
                dst = (src + shift) % world
                dist.barrier(group=group)
                if rank == src:
                    dist.send(buf, dst, group=group)
                elif rank == dst:
                    start = time.perf_counter()
                    dist.recv(buf, src, group=group)
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                    seconds = time.perf_counter() - start
                    rate = buf.numel() * 4 / 1e9 / seconds if seconds > 0 else 0.0
                    best[src] = max(rate, best.get(src, 0.0))
    dist.barrier(group=group)
    return (min(best.values()) if best else None), None


def adds_up(rec: dict[str, Any], tolerance: float) -> tuple[bool, list[str]]:
    """Whether every rank's parts add up to its measured step within ``tolerance``."""
    b = (rec.get("metrics") or {}).get("breakdown") or {}
    rows = b.get("per_rank") or []
    if not rows or not b.get("timed_steps"):
        return False, ["no breakdown in the record (no timed step?)"]
    ok, lines = True, [f"clock: {b.get('clock')}; {b.get('timed_steps')} timed steps"]
    for r in rows:
        total = sum(r[p] for p in PARTS)
        off = abs(total - r["step"]) / r["step"] if r["step"] > 0 else float("inf")
        ok = ok and off <= tolerance
        lines.append(f"rank {r['rank']}: step {r['step'] * 1000:.1f} ms, parts "
                     + " + ".join(f"{p} {r[p] * 1000:.1f}" for p in PARTS)
                     + f" = {total * 1000:.1f} ms ({off:.1%} off; limit {tolerance:.0%})")
    return ok, lines


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.fsdp.breakdown RECORD [--tolerance 0.05]``: 0 when the parts
    add up to the step on every rank, 1 when not, 2 for an unreadable record."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.fsdp.breakdown",
                                description="Check that a record's step-time parts add up.")
    p.add_argument("record")
    p.add_argument("--tolerance", type=float, default=0.05)
    a = p.parse_args(argv)
    try:
        with open(a.record) as fh:
            rec = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"error: {a.record}: {exc}", file=sys.stderr)
        return 2
    ok, lines = adds_up(rec, a.tolerance)
    print("\n".join(lines))
    print("breakdown adds up" if ok else "breakdown does NOT add up")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
