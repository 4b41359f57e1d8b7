"""The training loop with the process group configured as on GPU nodes.

There, ``init_process_group("nccl")`` binds NCCL to device type ``cuda`` only, and any
collective on a CPU tensor fails: "No backend type associated with device type cpu". Here the
default group gets gloo bound only to ``cuda`` (torch's "device:backend" form) while the
training mesh's groups carry gloo for the cpu, on which the model trains: a collective that
is not over the mesh on the training device fails the same way, so CI sees it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from benchmarks import gpu_mfu
from benchmarks.faultpoints import FAULT_ENV
from benchmarks.fsdp.train import WORLD_ONLY_ON
from tests.fsdp.fsdp_launch import TINY, free_port, run_ranks, unsharded_reference

NO_CPU_BACKEND = "No backend type associated with device type cpu"


def _rank(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from benchmarks.fsdp.meshcomm import (
        mesh_barrier,
        mesh_broadcast,
        mesh_max,
        mesh_mean,
        mesh_sum,
    )
    from benchmarks.fsdp.parallelize import build_mesh
    from benchmarks.fsdp.train import process_group_backends

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), **{FAULT_ENV: f"{WORLD_ONLY_ON}=cuda"})
    cpu = torch.device("cpu")
    backend, mesh_backend = process_group_backends(cpu)
    dist.init_process_group(backend)
    try:
        dist.all_reduce(torch.ones(1))
        stray = "a CPU all_reduce on the default group worked"
    except RuntimeError as exc:
        stray = str(exc)
    mesh = build_mesh("cpu", world, 2, hsdp=True, backend=mesh_backend)  # 2 x 2
    results = {
        "backend": backend, "stray": stray,
        "sum": mesh_sum([rank, 1.0], mesh, cpu), "max": mesh_max([rank * 10.0], mesh, cpu),
        "mean": mesh_mean(torch.tensor(float(rank)), mesh),
        "broadcast": mesh_broadcast(f"from {rank}", mesh),
    }
    mesh_barrier(mesh)
    Path(f"{out}.{rank}").write_text(repr(results))
    dist.destroy_process_group()


def test_default_group_refuses_cpu_tensors_and_the_mesh_reduces(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    world = 4
    mp.spawn(_rank, args=(world, free_port(), str(tmp_path / "r")), nprocs=world, join=True)
    for rank in range(world):
        got = eval((tmp_path / f"r.{rank}").read_text())  # a repr of plain literals
        assert got["backend"] == "cuda:gloo"
        assert NO_CPU_BACKEND in got["stray"]  # the harness bites as NCCL does on GPUs
        assert got["sum"] == [0 + 1 + 2 + 3, world]
        assert got["max"] == [30.0]
        assert got["mean"] == pytest.approx(1.5)
        assert got["broadcast"] == "from 0"


def test_training_loop_runs_with_the_backend_only_on_the_accelerator(tmp_path: Path) -> None:
    steps = 3
    run = run_ranks(2, [*TINY, "--steps", str(steps)], tmp_path / "record.json",
                    extra_env={FAULT_ENV: f"{WORLD_ONLY_ON}=cuda"})
    assert NO_CPU_BACKEND not in run.output, run.output
    assert run.returncodes == [0, 0], run.output
    assert run.record["params"]["backend"] == "cuda:gloo"
    assert run.record["verdict"]["status"] == "PASS"
    ref_losses, _ = unsharded_reference(steps)
    losses = [run.losses()[s] for s in range(1, steps + 1)]
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=1e-5)
    metrics = run.record["metrics"]
    assert metrics["peak_memory_gib"] > 0
    # no GPU, no peak: no MFU, and the record says what MFU would be measured in
    assert metrics["mfu"] is None and metrics["mfu_dtype"] == "float32"
    assert metrics["peak_tflops_source"] == "none: not a GPU"


def test_gpu_mfu_pipeline_runs_with_the_backend_only_on_the_accelerator(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(FAULT_ENV, f"{WORLD_ONLY_ON}=cuda")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    code = gpu_mfu.main(["--device", "cpu", "--model", "tiny", "--batch-size", "2",
                         "--seq-len", "32", "--steps", "3", "--timing-warmup", "1",
                         "--variants", "eager", "--out-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "eager" in out.out and "no MFU on CPU" in out.out
    assert (tmp_path / "record-eager.json").is_file()
