"""The FSDP benchmark across 4 nodes of the local Slurm twin (cpu partition, gloo): the
sharded run matches one unsharded process, and ``scontrol requeue`` after a checkpoint
resumes the loss curve where an uninterrupted run would be."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from benchmarks.faultpoints import setting
from benchmarks.fsdp.checkpoint import MARKER, step_dir
from tests.fsdp.fsdp_launch import REPO, TINY, unsharded_reference

pytestmark = pytest.mark.twin
NODES = ("--nodes=4", "--ntasks-per-node=1", "--partition=cpu")


def train_script(run_dir: Path, steps: int, *, env: str = "") -> str:
    args = " ".join([*TINY, "--device", "cpu", "--steps", str(steps),
                     "--ckpt-dir", str(run_dir / "ckpt"), "--ckpt-every", "5" if steps > 5
                     else str(steps), "--out", str(run_dir / "record.json")])
    return f"""#!/bin/bash
set -euo pipefail
cd {REPO}
export PYTHONPATH={REPO} OMP_NUM_THREADS=1 {env}
echo "restart ${{SLURM_RESTART_COUNT:-0}} on ${{SLURM_JOB_NODELIST}}"
srun --kill-on-bad-exit=1 {sys.executable} -m benchmarks.fsdp.train {args}
"""


def read_losses(run_dir: Path) -> tuple[dict, dict[int, float]]:
    rec = json.loads((run_dir / "record.json").read_text())
    return rec, {int(s): loss for s, loss in rec["metrics"]["losses"]}


def test_four_nodes_match_one_unsharded_process(twin, tmp_path: Path) -> None:
    state, output = twin.run(train_script(tmp_path, 4), *NODES, timeout=180)
    assert state == "COMPLETED", output
    rec, losses = read_losses(tmp_path)
    assert rec["params"]["world_size"] == 4 and rec["params"]["nodes"] == 4
    assert rec["cluster"]["partition"] == "cpu"
    reference, _ = unsharded_reference(4)
    for step, expected in enumerate(reference, start=1):
        assert losses[step] == pytest.approx(expected, rel=1e-5, abs=1e-5), step


def test_requeue_after_checkpoint_continues_the_loss_curve(twin, tmp_path: Path) -> None:
    # the first run holds after step 7 (its step-5 checkpoint is sealed) until requeued;
    # the requeued run resumed from a checkpoint, so it does not hold
    script = train_script(tmp_path, 10, env=setting(fsdp_hold_after_step=7))
    job_id, out = twin.sbatch(script, *NODES, "--requeue", "--open-mode=append")
    deadline = time.monotonic() + 120
    held = "fault point fsdp-hold-after-step=7: holding"
    while held not in (out.read_text() if out.exists() else ""):
        assert time.monotonic() < deadline, out.read_text() if out.exists() else "no output"
        assert not twin.state(job_id).startswith(("COMPLETED", "FAILED", "CANCELLED"))
        time.sleep(0.5)
    assert (step_dir(tmp_path / "ckpt", 5) / MARKER).is_file()
    twin.cmd("scontrol", "requeue", job_id)

    state = twin.wait(job_id, timeout=240)
    output = out.read_text()
    assert state == "COMPLETED", output
    assert "restart 1" in output and "resumed from the step-5 checkpoint" in output
    rec, losses = read_losses(tmp_path)
    assert rec["params"]["slurm_restart_count"] == 1
    assert rec["metrics"]["resumed_from_step"] == 5
    reference, _ = unsharded_reference(10)
    assert sorted(losses) == list(range(1, 11))
    for step in range(6, 11):
        assert losses[step] == pytest.approx(reference[step - 1], rel=1e-5, abs=1e-5), step


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
def test_pctk_bench_fsdp_on_the_twin(twin, tmp_path: Path, launcher: str) -> None:
    from toolkit.cli import main

    code = main(["bench", "fsdp", "--model", "tiny", "--nodes", "2", "--tasks-per-node", "2",
                 "--gpus-per-node", "0", "--partition", "cpu", "--steps", "6",
                 "--ckpt-every", "3", "--launcher", launcher, "--run-dir", str(tmp_path),
                 "--timeout", "180"])
    log = "\n".join(p.read_text() for p in tmp_path.glob("slurm-*.out"))
    assert code == 0, log
    rec, losses = read_losses(tmp_path)
    assert rec["params"]["world_size"] == 4 and rec["params"]["ranks_per_node"] == 2
    assert len(rec["metrics"]["checkpoint_saves"]) == 2
    assert sorted(losses) == list(range(1, 7))


def test_ctrl_c_during_bench_fsdp_names_the_job_that_keeps_running(twin, tmp_path: Path
                                                                   ) -> None:
    # Ctrl-C used to exit 130 without a word, the job left running unnamed: now as
    # `pctk submit --wait`, one line naming the job and how to cancel it
    import signal
    import subprocess

    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "pctk"), "bench", "fsdp", "--model", "tiny",
         "--nodes", "1", "--tasks-per-node", "1", "--gpus-per-node", "0", "--partition", "cpu",
         "--steps", "100000", "--run-dir", str(tmp_path), "--timeout", "600", "--no-store"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job_id = ""
    try:
        deadline = time.monotonic() + 120
        while not (logs := list(tmp_path.glob("slurm-*.out"))):
            assert time.monotonic() < deadline and proc.poll() is None, "the job never started"
            time.sleep(0.2)
        job_id = logs[0].stem.split("-")[1]
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        # the last line (progress lines go to stderr too when it is not a terminal)
        twin.assert_left_running(job_id, err)
    finally:
        twin.clean_up(proc, job_id)
