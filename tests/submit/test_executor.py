"""toolkit.submit on the real twin: executors from the cluster config, arrays, requeue."""

from __future__ import annotations

import os
import time

import pytest
import submitit

from tests.twinutil import STALE_LAUNCHER
from toolkit.errors import PctkError
from toolkit.submit import ClusterExecutor, distributed_executor, submit_distributed

pytestmark = pytest.mark.twin


def _squeue_count(twin) -> int:
    return len(twin.cmd("squeue", "--states=all", "-h", "-o", "%i").stdout.split())


def test_gpu_queue_executor_sets_partition_gpus_and_efa_env(twin, tmp_path):
    def probe() -> dict[str, str]:
        import os

        keys = ("SLURM_JOB_PARTITION", "SLURM_GPUS_ON_NODE", "CUDA_VISIBLE_DEVICES",
                "FI_PROVIDER", "FI_EFA_USE_HUGE_PAGE", "PCTK_INSTANCE_TYPE", "SLURMD_NODENAME")
        return {k: os.environ.get(k, "") for k in keys}

    ex = ClusterExecutor(tmp_path, queue="gpu", gpus_per_node=8, timeout_min=5)
    assert ex.parameters["exclusive"] is True
    env = ex.submit(probe).result()
    assert env["SLURM_JOB_PARTITION"] == "gpu"
    assert env["SLURM_GPUS_ON_NODE"] == "8"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_HUGE_PAGE"] == "0"
    assert env["PCTK_INSTANCE_TYPE"] == "p5.48xlarge"
    assert env["SLURMD_NODENAME"].startswith("gpu-st-p5-")


def test_cpu_queue_gets_no_efa_env(twin, tmp_path, monkeypatch):
    # submitted from a notebook whose kernel a torchrun session started: its RANK, MASTER_ADDR...
    # describe that run and do not reach the job
    for k, v in STALE_LAUNCHER.items():
        monkeypatch.setenv(k, v)

    def fi() -> list[str]:
        import os

        return [os.environ.get(k, "<unset>") for k in ("FI_PROVIDER", "RANK", "MASTER_ADDR")]

    assert ClusterExecutor(tmp_path, queue="cpu", timeout_min=5).submit(fi).result() == \
        ["<unset>"] * 3


def test_bad_requests_fail_before_anything_is_submitted(twin, tmp_path):
    before = _squeue_count(twin)
    with pytest.raises(PctkError, match=r"the queues in .* are: gpu, cpu"):
        ClusterExecutor(tmp_path, queue="gpus")
    with pytest.raises(PctkError, match="has 8 GPUs per node; 9 were asked for"):
        ClusterExecutor(tmp_path, queue="gpu", gpus_per_node=9)
    with pytest.raises(PctkError, match="has 0 GPUs per node"):
        ClusterExecutor(tmp_path, queue="cpu", gpus_per_node=1)
    import threading

    ex = ClusterExecutor(tmp_path / "x", queue="cpu", timeout_min=5)
    with pytest.raises(PctkError, match="does not pickle"):
        ex.submit(len, threading.Lock())
    with pytest.raises(PctkError, match="does not pickle"):
        ex.map_array(lambda x: x, [threading.Lock()])
    assert _squeue_count(twin) == before
    assert not list((tmp_path / "x").glob("*.pkl"))


def test_distributed_function_runs_on_every_rank_of_four_nodes(twin, tmp_path):
    def allreduce_ranks() -> tuple[int, int, float, str]:
        import os

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo")
        t = torch.tensor([float(dist.get_rank())])
        dist.all_reduce(t)
        out = (dist.get_rank(), dist.get_world_size(), t.item(), os.environ["SLURMD_NODENAME"])
        dist.destroy_process_group()
        return out

    ex = distributed_executor(tmp_path, queue="cpu", nodes=4, timeout_min=10)
    assert ex.parameters["ntasks_per_node"] == 1  # cpu queue: one rank per node
    job = submit_distributed(ex, allreduce_ranks)
    results = job.results()
    assert [r[0] for r in results] == [0, 1, 2, 3]
    assert all(r[1] == 4 and r[2] == 6.0 for r in results)
    assert {r[3] for r in results} == {f"cpu-dy-c5-{i}" for i in range(1, 5)}
    assert job.task(0).result() == results[0]


def test_gpu_queue_runs_one_task_per_gpu(twin, tmp_path):
    ex = distributed_executor(tmp_path, queue="gpu", nodes=1, timeout_min=5)
    assert ex.parameters["ntasks_per_node"] == 8 and ex.parameters["gpus_per_node"] == 8


def test_dependency_afterok_waits_for_the_first_job(twin, tmp_path):
    def slow(x: int) -> int:
        import time

        time.sleep(2)
        return x

    ex = ClusterExecutor(tmp_path, queue="cpu", timeout_min=5)
    first = ex.submit(slow, 1)
    ex.depend_on(first)
    second = ex.submit(slow, 2)
    assert second.result() == 2 and first.result() == 1
    rows = twin.cmd("sacct", "-n", "-X", "-P", "-o", "JobID,Start,End", "-j",
                    f"{first.job_id},{second.job_id}").stdout.splitlines()
    times = {r.split("|")[0]: r.split("|")[1:] for r in rows}
    assert times[second.job_id][0] >= times[first.job_id][1]
    with pytest.raises(PctkError, match="unknown dependency kind"):
        ex.depend_on(first, kind="whenever")


class _Counter(submitit.helpers.Checkpointable):
    """Counts to n slowly; checkpointed on preemption and resumed from where it was."""

    def __init__(self) -> None:
        self.i = 0
        self.total = 0
        self.resumed = 0

    def __call__(self, n: int, marker: str) -> tuple[int, int, int]:
        import pathlib
        import time

        if self.i:
            self.resumed += 1
        while self.i < n:
            self.i += 1
            self.total += self.i
            pathlib.Path(marker).write_text(str(self.i))
            time.sleep(0.1)
        return self.i, self.total, self.resumed


def test_checkpointable_job_requeues_after_preemption_and_finishes_right(twin, tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(__import__(__name__))
    marker = tmp_path / "progress"
    ex = ClusterExecutor(tmp_path / "jobs", queue="cpu", timeout_min=5)
    job = ex.submit(_Counter(), 60, str(marker))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # read once: the job rewrites the file while we look (an empty read is "not yet")
        seen = marker.read_text() if marker.exists() else ""
        if seen.isdigit() and int(seen) >= 10:
            break
        time.sleep(0.1)
    job._interrupt()  # SIGTERM + USR2, as Slurm does on preemption
    count, total, resumed = job.result()
    assert count == 60 and total == 60 * 61 // 2
    assert resumed == 1
    # Slurm requeued it once (scontrol keeps the count while the job is in memory)
    shown = twin.cmd("scontrol", "show", "job", job.job_id).stdout
    assert "Restarts=1" in shown


def test_a_new_job_folder_is_private_to_its_owner(twin, tmp_path):
    folder = tmp_path / "private" / "jobs"
    ex = ClusterExecutor(folder, queue="cpu", timeout_min=5)
    job = ex.submit(os.getpid)
    job.result()
    assert folder.stat().st_mode & 0o777 == 0o700 & ~_umask()
    assert job.paths.stdout.exists()  # the log Slurm wrote is inside it


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask
