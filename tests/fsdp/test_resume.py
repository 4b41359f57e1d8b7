"""A run killed after a checkpoint and restarted continues the uninterrupted loss curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.faultpoints import FAULT_ENV
from benchmarks.fsdp.checkpoint import MARKER, complete_steps, step_dir
from tests.fsdp.fsdp_launch import TINY, run_ranks

ARGS = [*TINY, "--steps", "10", "--ckpt-every", "5", "--warmup-steps", "3"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[int, float]:
    tmp = tmp_path_factory.mktemp("straight")
    run = run_ranks(2, [*ARGS, "--ckpt-dir", str(tmp / "ckpt")], tmp / "record.json")
    assert run.returncodes == [0, 0], run.output
    return run.losses()


@pytest.mark.parametrize("restart_world", [2, 4], ids=["same-world", "resharded-to-4"])
def test_killed_run_resumes_the_loss_curve(tmp_path: Path, uninterrupted: dict[int, float],
                                           restart_world: int) -> None:
    ckpt = tmp_path / "ckpt"
    crashed = run_ranks(2, [*ARGS, "--ckpt-dir", str(ckpt)], tmp_path / "crashed.json",
                        extra_env={FAULT_ENV: "fsdp-crash-at-step=7"})
    assert crashed.returncodes == [17, 17], crashed.output
    assert crashed.record is None
    assert complete_steps(ckpt) == [5]

    resumed = run_ranks(restart_world, [*ARGS, "--ckpt-dir", str(ckpt)],
                        tmp_path / "resumed.json")
    assert resumed.returncodes == [0] * restart_world, resumed.output
    metrics = resumed.record["metrics"]
    assert metrics["resumed_from_step"] == 5
    assert metrics["checkpoint_load"]["bytes"] > 0
    assert resumed.record["verdict"]["status"] == "PASS"
    losses = resumed.losses()
    assert sorted(losses) == list(range(1, 11))  # steps 1-5 carried over from the checkpoint
    for step in range(1, 11):
        assert losses[step] == pytest.approx(uninterrupted[step], rel=1e-5, abs=1e-5), step
    assert "step     6" in resumed.output and "step     5 " not in resumed.output


def test_only_sealed_checkpoints_count(tmp_path: Path) -> None:
    for step in (5, 10, 15):
        step_dir(tmp_path, step).mkdir()
    for step in (5, 10):
        (step_dir(tmp_path, step) / MARKER).write_text(f"{step}\n")
    (tmp_path / "step-notanumber").mkdir()
    assert complete_steps(tmp_path) == [5, 10]
    assert complete_steps(tmp_path / "missing") == []
