"""A submitit executor that knows the cluster: queues, GPUs, EFA, arrays, requeue.

``ClusterExecutor`` *is* a ``submitit.SlurmExecutor``: ``submit``, ``map_array``,
``batch``, ``Checkpointable`` requeue and every ``update_parameters`` key keep working.
What it adds:

* partition, GPUs, CPUs and exclusivity from the cluster config and the instance catalog, with
  errors before anything is submitted (unknown queue, more GPUs than the instance has,
  a function that cannot be pickled);
* the EFA/NCCL environment on EFA queues (see :mod:`toolkit.submit.efa`);
* job names passed to ``sbatch`` as one argument, verbatim, never through a script line;
* arrays longer than the cluster's ``MaxArraySize`` split into several arrays;
* job state with or without accounting, one ``sacct``/``squeue`` call per poll
  (:mod:`toolkit.submit.watcher`).

The submitit members it overrides or calls that submitit keeps private come from
:mod:`toolkit.submit.submitit_private`, which checks their signatures on import.
"""

from __future__ import annotations

import os
import shlex
import typing as tp
import uuid
import warnings
from pathlib import Path

import cloudpickle
import submitit

from toolkit import catalog
from toolkit.config.model import ClusterTopology, ComputeResource, Queue
from toolkit.errors import PctkError
from toolkit.slurm import array_chunks, max_array_size, parse_job_id, sbatch_command
from toolkit.submit.cluster import load_cluster, use_running_twin
from toolkit.submit.command import register_job
from toolkit.submit.efa import efa_env
from toolkit.submit.feasible import check_satisfiable
from toolkit.submit.jobspec import JobSpec, sbatch_options, unset_launcher_variables
from toolkit.submit.request import check_request

# submitit's private members, checked against the installed submitit when first imported
from toolkit.submit.submitit_private import SlurmExecutor, core, make_sbatch_string, utils
from toolkit.submit.watcher import PctkSlurmJob

SAFE_SCRIPT_JOB_NAME = "pctk"


def check_picklable(fn: tp.Callable[..., tp.Any], *args: tp.Any, **kwargs: tp.Any) -> None:
    try:
        cloudpickle.dumps((fn, args, kwargs))
    except Exception as exc:  # pickling raises many types
        name = getattr(fn, "__qualname__", repr(fn))
        raise PctkError(
            f"cannot send {name} to the cluster: it does not pickle ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})",
            "pass plain data; open files, locks, sockets and generators cannot travel to a node",
        ) from None


def _pick_resource(queue: Queue, name: str | None) -> ComputeResource:
    if name is None:
        return queue.compute_resources[0]
    for cr in queue.compute_resources:
        if cr.name == name:
            return cr
    known = ", ".join(cr.name for cr in queue.compute_resources)
    raise PctkError(f"queue {queue.name} has no compute resource {name!r}",
                    f"choose one of: {known}")


class ClusterExecutor(SlurmExecutor):
    """submitit's Slurm executor, configured from a ParallelCluster config and a queue."""

    job_class = PctkSlurmJob

    def __init__(
        self,
        folder: str | Path,
        *,
        cluster: str | os.PathLike[str] | ClusterTopology | None = None,
        queue: str | None = None,
        compute_resource: str | None = None,
        nodes: int = 1,
        gpus_per_node: int | None = None,
        tasks_per_node: int | None = None,
        cpus_per_task: int | None = None,
        timeout_min: int = 60,
        exclusive: bool | None = None,
        container_image: str | None = None,
        container_mounts: str | None = None,
        nccl_debug: bool = False,
        max_num_timeout: int = 3,
        python: str | None = None,
        **slurm_params: tp.Any,
    ) -> None:
        super().__init__(folder, max_num_timeout=max_num_timeout, python=python)
        # a new job folder is private (0700 less the umask), like `pctk submit`'s
        utils.JobPaths.get_first_id_independent_folder(self.folder).mkdir(
            mode=0o700, parents=True, exist_ok=True)
        use_running_twin()  # no SLURM_CONF and no system Slurm: the running twin, if any
        self.topology = load_cluster(cluster)
        self.queue = self.topology.queue(queue) if queue else self.topology.queues[0]
        self.resource = _pick_resource(self.queue, compute_resource)
        self.instance = catalog.find(self.resource.instance_type)
        self.gpus_available = check_request(self.queue, self.resource, gpus_per_node, nodes)
        if exclusive is None:
            exclusive = bool(gpus_per_node) and gpus_per_node == self.gpus_available
        params: dict[str, tp.Any] = {
            "partition": self.queue.name,
            "nodes": nodes,
            "time": timeout_min,
        }
        if gpus_per_node:
            params["gpus_per_node"] = gpus_per_node
        if tasks_per_node:
            params["ntasks_per_node"] = tasks_per_node
        if cpus_per_task:
            params["cpus_per_task"] = cpus_per_task
        if exclusive:
            params["exclusive"] = True
        env = efa_env(self.resource.efa, debug=nccl_debug)
        setup = [*unset_launcher_variables(),
                 *(f"export {k}={shlex.quote(v)}" for k, v in env.items())]
        if self.instance:
            setup.append(f"export PCTK_INSTANCE_TYPE={shlex.quote(self.instance.name)}")
        params["setup"] = setup
        if container_image:
            srun = [f"--container-image={container_image}"]
            if container_mounts:
                srun.append(f"--container-mounts={container_mounts}")
            params["srun_args"] = srun
        params.update(slurm_params)
        self.update_parameters(**params)

    # ------------------------------------------------------------ submission
    def submit(self, fn: tp.Callable[..., core.R], *args: tp.Any, **kwargs: tp.Any
               ) -> core.Job[core.R]:
        check_picklable(fn, *args, **kwargs)
        return super().submit(fn, *args, **kwargs)

    def map_array(self, fn: tp.Callable[..., core.R], *iterable: tp.Iterable[tp.Any]
                  ) -> list[core.Job[core.R]]:
        columns = [list(it) for it in iterable]
        check_picklable(fn)
        for args in zip(*columns, strict=False):
            check_picklable(fn, *args)
        return super().map_array(fn, *columns)

    def depend_on(self, *jobs: core.Job[tp.Any], kind: str = "afterok") -> None:
        """Make the next submissions wait for ``jobs`` (afterok, afterany, afternotok, after)."""
        if kind not in ("afterok", "afterany", "afternotok", "after", "aftercorr"):
            raise PctkError(f"unknown dependency kind {kind!r}",
                            "use afterok, afterany, afternotok, after or aftercorr")
        extra = dict(self.parameters.get("additional_parameters") or {})
        if jobs:
            extra["dependency"] = f"{kind}:" + ":".join(j.job_id for j in jobs)
        else:
            extra.pop("dependency", None)
        self.update_parameters(additional_parameters=extra)

    def _make_submission_file_text(self, command: str, uid: str) -> str:
        # the real job name goes to sbatch as an argument (see _make_submission_command)
        params = dict(self.parameters)
        params["job_name"] = SAFE_SCRIPT_JOB_NAME

        return make_sbatch_string(command=command, folder=self.folder, **params)

    def _make_submission_command(self, submission_file_path: Path) -> list[str]:
        name = str(self.parameters.get("job_name", "submitit"))
        return sbatch_command(submission_file_path, f"--job-name={name}")

    @staticmethod
    def _get_job_id_from_submission_command(string: bytes | str) -> str:
        return parse_job_id(string.decode() if isinstance(string, bytes) else string)

    def _resource_args(self) -> list[str]:
        """The sbatch options that decide where the job can run, for ``--test-only``."""
        p = self.parameters
        return sbatch_options(JobSpec(
            nodes=p.get("nodes", 1), ntasks_per_node=p.get("ntasks_per_node") or None,
            cpus_per_task=p.get("cpus_per_task") or None,
            gpus_per_node=p.get("gpus_per_node") or None, mem=p.get("mem") or None,
            exclusive=bool(p.get("exclusive")), partition=p["partition"],
            time=p.get("time", 5)))

    def _internal_process_submissions(
        self, delayed_submissions: list[utils.DelayedSubmission]
    ) -> list[core.Job[tp.Any]]:
        if delayed_submissions:
            note = check_satisfiable(self._resource_args(), str(self.parameters["partition"]))
            if note:
                warnings.warn(note, stacklevel=3)  # submitted: it runs once they are back
        jobs = self._submit_delayed(delayed_submissions)

        for main in dict.fromkeys(j.job_id.split("_")[0] for j in jobs):
            register_job(main, str(self.folder), "submitit")
        return jobs

    def _submit_delayed(self, delayed_submissions: list[utils.DelayedSubmission]
                        ) -> list[core.Job[tp.Any]]:
        if len(delayed_submissions) == 1:
            return super()._internal_process_submissions(delayed_submissions)
        folder = utils.JobPaths.get_first_id_independent_folder(self.folder)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        timeout_min = self.parameters.get("time", 5)
        size = max_array_size()
        jobs: list[core.Job[tp.Any]] = []
        previous: core.Job[tp.Any] | None = None
        for start, idx in array_chunks(list(range(len(delayed_submissions))), size):
            chunk = delayed_submissions[start : start + len(idx)]
            pickles = []
            for d in chunk:
                path = folder / f"{uuid.uuid4().hex}.pkl"
                d.set_timeout(timeout_min, self.max_num_timeout)
                d.dump(path)
                pickles.append(path)
            array_ex = self._clone()
            array_ex.parameters["map_count"] = len(chunk)
            if previous is not None and self.parameters.get("array_parallelism"):
                # keep the concurrency limit across chunks: the next array starts after this one
                extra = dict(array_ex.parameters.get("additional_parameters") or {})
                extra["dependency"] = f"afterany:{previous.job_id.split('_')[0]}"
                array_ex.parameters["additional_parameters"] = extra
            self._throttle()
            first = array_ex._submit_command(self._submitit_command_str)
            tasks = list(range(first.num_tasks))
            chunk_jobs = [self.job_class(folder=self.folder, job_id=f"{first.job_id}_{i}",
                                         tasks=tasks) for i in range(len(chunk))]
            for job, path in zip(chunk_jobs, pickles, strict=True):
                job.paths.move_temporary_file(path, "submitted_pickle")
            jobs.extend(chunk_jobs)
            previous = first
        return jobs

    def _clone(self) -> SlurmExecutor:
        """A bare copy that submits one array (the parameters are copied, not shared)."""
        ex = SlurmExecutor.__new__(type(self))
        SlurmExecutor.__init__(ex, self.folder, self.max_num_timeout, python=self.python)
        ex.parameters = dict(self.parameters)
        return ex


class _TorchDistributed:
    """Runs ``fn`` in every task with RANK/WORLD_SIZE/MASTER_ADDR/... exported."""

    def __init__(self, fn: tp.Callable[..., tp.Any]):
        self.fn = fn

    def __call__(self, *args: tp.Any, **kwargs: tp.Any) -> tp.Any:
        submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
        return self.fn(*args, **kwargs)


def distributed_executor(folder: str | Path, *, nodes: int, gpus_per_node: int | None = None,
                         **kwargs: tp.Any) -> ClusterExecutor:
    """An executor for nodes × GPUs ranks (one task per GPU; one per node on CPU queues)."""
    probe = ClusterExecutor(folder, nodes=nodes, **kwargs)
    gpus = probe.gpus_available if gpus_per_node is None else gpus_per_node
    tasks = max(1, gpus)
    return ClusterExecutor(folder, nodes=nodes, gpus_per_node=gpus or None,
                           tasks_per_node=tasks, **kwargs)


def submit_distributed(executor: ClusterExecutor, fn: tp.Callable[..., core.R], *args: tp.Any,
                       **kwargs: tp.Any) -> core.Job[core.R]:
    """Submit ``fn`` to run on every rank with torch.distributed's environment set.

    ``job.results()`` is every rank's return value in rank order; ``job.task(0).result()``
    is rank 0's alone.
    """
    return executor.submit(_TorchDistributed(fn), *args, **kwargs)
