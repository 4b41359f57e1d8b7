"""Distributed checkpoints with torch.distributed.checkpoint (DCP), timed as a storage test.

Layout under the checkpoint folder::

    step-00000005/            DCP shards of model and optimizer, written by every rank
    step-00000005/train.json  step, lr-scheduler state, data position (rank 0)
    step-00000005/COMPLETE    written atomically by rank 0 after every rank finished

Only a folder with ``COMPLETE`` counts: a job killed half-way through a save leaves a folder
without it, which resume ignores and the next save of that step replaces.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

MARKER = "COMPLETE"
TRAIN_STATE = "train.json"


@dataclass(frozen=True)
class Timing:
    step: int
    seconds: float
    bytes: int

    @property
    def gb_per_s(self) -> float:
        return self.bytes / 1e9 / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {"step": self.step, "seconds": self.seconds, "bytes": self.bytes,
                "gb_per_s": self.gb_per_s}


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step:08d}"


def complete_steps(root: Path) -> list[int]:
    """Steps with a finished checkpoint, oldest first."""
    if not root.is_dir():
        return []
    steps = []
    for d in root.glob("step-*"):
        if (d / MARKER).is_file() and d.name[5:].isdigit():
            steps.append(int(d.name[5:]))
    return sorted(steps)


def written_by_a_save(folder: Path) -> str | None:
    """None when every entry of ``folder`` is one a save writes (DCP's shards and metadata,
    ``train.json``, ``COMPLETE``, their temporary files); else the first other entry's name.
    A folder is removed before a save of its step only then: its name is pctk's, but a user
    may have put it there or something in it."""
    for entry in sorted(folder.iterdir()):
        name = entry.name
        ours = (name.endswith(".distcp") or name in (".metadata", TRAIN_STATE, MARKER)
                or name.startswith((f".{TRAIN_STATE}.", f".{MARKER}.", ".metadata.")))
        if not ours or entry.is_symlink() or entry.is_dir():
            return name
    return None


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _is_rank0() -> bool:
    return dist.get_rank() == 0


def save(root: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
         train_state: dict[str, Any], keep: int) -> Timing:
    """Collective: every rank writes its shards; rank 0 seals the folder and prunes old ones."""
    target = step_dir(root, step)
    refused = None
    if _is_rank0():
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            refused = f"{target} is not a folder a save wrote"
        elif target.exists():  # an unfinished save of this step from a killed run
            foreign = written_by_a_save(target)
            if foreign is None:
                shutil.rmtree(target)
            else:
                refused = f"{target} holds {foreign!r}, which no checkpoint save writes"
        if refused is None:
            target.mkdir(parents=True)
    problem = [refused]
    dist.broadcast_object_list(problem, src=0)  # every rank stops, not only rank 0
    if problem[0] is not None:
        raise RuntimeError(f"checkpoint not saved: {problem[0]}; move it away or use "
                           "another --ckpt-dir")
    dist.barrier()
    model_sd, optim_sd = get_state_dict(model, optimizer)
    start = time.perf_counter()
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(target))
    dist.barrier()
    seconds = time.perf_counter() - start
    size = 0
    if _is_rank0():
        _write_atomic(target / TRAIN_STATE, json.dumps(train_state, sort_keys=True))
        size = _folder_bytes(target)
        _write_atomic(target / MARKER, f"{step}\n")
        for old in complete_steps(root)[:-keep] if keep > 0 else []:
            shutil.rmtree(step_dir(root, old), ignore_errors=True)
    dist.barrier()
    return Timing(step, seconds, size)


def load(root: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer
         ) -> tuple[dict[str, Any], Timing]:
    """Collective: restore model and optimizer in place; return the train state."""
    source = step_dir(root, step)
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state: dict[str, Any] = {"model": model_sd, "optim": optim_sd}
    dist.barrier()
    start = time.perf_counter()
    dcp.load(state, checkpoint_id=str(source))
    dist.barrier()
    seconds = time.perf_counter() - start
    set_state_dict(model, optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    train_state = json.loads((source / TRAIN_STATE).read_text())
    size = _folder_bytes(source) if _is_rank0() else 0
    return train_state, Timing(step, seconds, size)
