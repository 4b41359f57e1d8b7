"""Test helper: run ``benchmarks.fsdp.train`` as N local gloo ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.fsdp.data import SyntheticBatches
from benchmarks.fsdp.model import Transformer, preset
from benchmarks.fsdp.optim import OptimConfig, build_optimizer
from tests.ports import rendezvous_port

REPO = Path(__file__).resolve().parents[2]
TINY = ["--model", "tiny", "--batch-size", "8", "--seq-len", "32", "--timing-warmup", "1"]


def free_port() -> int:
    return rendezvous_port()


@dataclass
class Run:
    returncodes: list[int]
    output: str
    record: dict[str, Any] | None

    def losses(self) -> dict[int, float]:
        assert self.record is not None, self.output
        return {int(step): loss for step, loss in self.record["metrics"]["losses"]}


def run_ranks(world: int, args: list[str], out: Path | None, *, extra_env: dict[str, str]
              | None = None, ranks_per_node: int | None = None, timeout: float = 240) -> Run:
    """Start ``world`` processes with torchrun's variables on one host and wait for all;
    ``ranks_per_node`` pretends they sit on world/ranks_per_node nodes (for HSDP)."""
    port = str(free_port())
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RANK",
                                                                      "WORLD_SIZE", "MASTER_"))}
    base.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port, WORLD_SIZE=str(world),
                LOCAL_WORLD_SIZE=str(ranks_per_node or world),
                **(extra_env or {}))
    cmd = [sys.executable, "-m", "benchmarks.fsdp.train", "--device", "cpu", *args]
    if out is not None:
        cmd += ["--out", str(out)]
    procs = [
        subprocess.Popen(cmd, cwd=REPO, env={**base, "RANK": str(r), "LOCAL_RANK": str(r)},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(world)
    ]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    rec = json.loads(out.read_text()) if out is not None and out.exists() else None
    return Run([p.returncode for p in procs], "\n".join(outputs), rec)


def unsharded_reference(steps: int) -> tuple[list[float], dict[str, torch.Tensor]]:
    """The plain training loop: no process group, no FSDP, the whole global batch at once."""
    torch.manual_seed(0)
    model = Transformer(preset("tiny"))
    cfg = OptimConfig()
    optimizer, scheduler = build_optimizer(model, cfg, steps)
    data = SyntheticBatches(model.args.vocab_size, 0, 8, 32, rank=0, world_size=1)
    losses = []
    for step in range(1, steps + 1):
        inputs, targets = data.local_batch(step, torch.device("cpu"))
        loss = F.cross_entropy(model(inputs).flatten(0, 1).float(), targets.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        losses.append(loss.item())
    return losses, {k: v.detach() for k, v in model.state_dict().items()}
