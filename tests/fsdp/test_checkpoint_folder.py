"""A save replaces an unfinished folder of its step only when a save wrote everything in it:
the folder's name is pctk's, but what a user put there is not, and is never deleted. One real
DCP save on a single gloo rank in this process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from benchmarks.fsdp.checkpoint import MARKER, save, step_dir, written_by_a_save
from tests.fsdp.fsdp_launch import free_port


@pytest.fixture
def one_rank(tmp_path: Path) -> Iterator[None]:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _save(root: Path) -> None:
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 4)).sum().backward()
    opt.step()
    save(root, 5, model, opt, {"step": 5}, keep=2)


def test_an_unfinished_save_is_replaced_a_foreign_entry_is_kept(one_rank, tmp_path: Path
                                                               ) -> None:
    root = tmp_path / "ckpt"
    _save(root)
    folder = step_dir(root, 5)
    assert (folder / MARKER).is_file() and written_by_a_save(folder) is None
    (folder / MARKER).unlink()  # as a save killed half-way leaves it
    _save(root)
    assert (folder / MARKER).is_file()
    (folder / MARKER).unlink()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(RuntimeError, match=r"holds 'notes\.txt', which no checkpoint save"):
        _save(root)
    assert (folder / "notes.txt").read_text() == "mine"
    assert any(p.name.endswith(".distcp") for p in folder.iterdir())  # nothing removed
