"""The FSDP benchmark and the scaling study from Python, as ``pctk bench fsdp`` and ``pctk
bench scaling`` run them: the same options by the same names and defaults, the cluster in use
found (Slurm's own configuration, else the running twin), the records stored in the results
database, and an interrupt that names the jobs left running
(:class:`toolkit.submit.longrun.StoppedWaiting`).

Each run is two steps, so that a caller can look at the batch script before submitting:
``*_job`` plans and validates (nothing is submitted), ``run_*`` submits, waits and stores;
:func:`bench_fsdp` and :func:`scaling_study` do both.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.record import write_record
from toolkit.bench.fsdp import driver as fsdp
from toolkit.bench.scaling import driver as scaling
from toolkit.errors import PctkError
from toolkit.results.ingest import Ingested, store_finished_run, store_finished_runs
from toolkit.results.scaling import scaling_record, study
from toolkit.results.store import ResultStore
from toolkit.submit.cluster import use_running_twin
from toolkit.submit.longrun import long_run


@dataclass(frozen=True)
class FsdpResult:
    """A finished (or, without waiting, submitted) FSDP run."""

    job: fsdp.FsdpJob
    job_id: str
    record: dict[str, Any] | None  # None when not waited for
    log: Path
    failed: bool  # the record's verdict failed
    stored: list[Ingested] = field(default_factory=list)

    @property
    def record_path(self) -> Path:
        return self.job.record_path


@dataclass(frozen=True)
class ScalingStudy:
    """A scaling study: its ``scaling`` record (the prediction and the diagnosis of each
    size, the verdict), the per-size records, the plots, and the sizes that gave no record."""

    job: scaling.ScalingJob
    job_id: str
    record: dict[str, Any]
    sizes: list[dict[str, Any]]
    plots: list[Path]
    missing: list[int]
    stored: list[Ingested] = field(default_factory=list)

    @property
    def record_path(self) -> Path:
        return self.job.record_path

    @property
    def failed(self) -> bool:
        return self.record["verdict"]["status"] == "FAIL" or bool(self.missing)


def _sizes(nodes: str | int | list[int] | tuple[int, ...]) -> tuple[int, ...]:
    if isinstance(nodes, str):
        return scaling.parse_sizes(nodes)
    if isinstance(nodes, int):
        return scaling.parse_sizes(str(nodes))
    return scaling.parse_sizes(",".join(str(int(n)) for n in nodes))


def fsdp_job(nodes: int = 1, *, batch_per_gpu: int | None = None, partition: str | None = None,
             instance_type: str | None = None, tasks_per_node: int | None = None,
             gpus_per_node: int | None = None, launcher: str = "srun",
             time_limit: str | None = None, run_dir: Path | str | None = None,
             **train: Any) -> fsdp.FsdpJob:
    """The FSDP job ``pctk bench fsdp`` would submit with these options (``train``: the
    TrainConfig fields by name, e.g. ``model="tiny", steps=20``); nothing is submitted."""
    use_running_twin()
    config, seq_len = fsdp.train_settings(**train)
    return fsdp.plan(config, nodes=nodes, batch_per_gpu=batch_per_gpu, seq_len=seq_len,
                     partition=partition, instance_type=instance_type,
                     tasks_per_node=tasks_per_node, gpus_per_node=gpus_per_node,
                     launcher=launcher, time_limit=time_limit,
                     run_dir=None if run_dir is None else Path(run_dir))


def run_fsdp(job: fsdp.FsdpJob, *, wait: bool = True, timeout: float | None = None,
             progress: bool = True, store: bool = True, db: Path | str | None = None
             ) -> FsdpResult:
    """Submit ``job``; with ``wait``, wait for it and store its record (``store``)."""
    with long_run():
        done = fsdp.run(job, wait_for_it=wait, timeout=timeout, quiet=not progress)
    stored: list[Ingested] = []
    if done.record is not None and store:
        item = store_finished_run(job.record_path, None if db is None else Path(db))
        stored = [item] if item is not None else []
    return FsdpResult(job, done.job_id, done.record, done.log,
                      done.record is not None and done.failed, stored)


def bench_fsdp(nodes: int = 1, *, wait: bool = True, timeout: float | None = None,
               progress: bool = True, store: bool = True, db: Path | str | None = None,
               **options: Any) -> FsdpResult:
    """``pctk bench fsdp`` from Python: :func:`fsdp_job` with ``options``, then
    :func:`run_fsdp`."""
    return run_fsdp(fsdp_job(nodes, **options), wait=wait, timeout=timeout, progress=progress,
                    store=store, db=db)


def scaling_job(nodes: str | int | list[int] | tuple[int, ...] = (1, 2, 4), *,
                strong: bool = False, batch_per_gpu: int = 1, partition: str | None = None,
                instance_type: str | None = None, tasks_per_node: int | None = None,
                gpus_per_node: int | None = None, launcher: str = "srun",
                time_limit: str | None = None, run_dir: Path | str | None = None,
                **train: Any) -> scaling.ScalingJob:
    """The one allocation ``pctk bench scaling`` would submit (every size a job step on the
    first N nodes); nothing is submitted. ``nodes`` as ``"1,2,4"`` or ``[1, 2, 4]``."""
    use_running_twin()
    config, seq_len = fsdp.train_settings(**train)
    return scaling.plan(config, sizes=_sizes(nodes), strong=strong,
                        batch_per_gpu=batch_per_gpu,
                        run_dir=None if run_dir is None else Path(run_dir), seq_len=seq_len,
                        partition=partition, instance_type=instance_type,
                        tasks_per_node=tasks_per_node, gpus_per_node=gpus_per_node,
                        launcher=launcher, time_limit=time_limit)


def run_scaling(job: scaling.ScalingJob, *, timeout: float | None = None,
                progress: bool = True, store: bool = True, db: Path | str | None = None
                ) -> ScalingStudy:
    """Submit the study, wait, then write its record and plots to the run folder first (a
    results database that cannot be written loses nothing) and store every record."""
    with long_run():
        done = scaling.run(job, timeout=timeout, quiet=not progress)
    where = None if db is None else Path(db)
    rec, plots = summarise(job, done.records, where, store)
    write_record(job.record_path, rec)
    stored: list[Ingested] = []
    if store:
        stored = store_finished_runs([*(size.record_path for size in job.jobs
                                        if size.nodes not in done.missing),
                                      job.record_path], where) or []
    return ScalingStudy(job, done.job_id, rec, done.records, plots, done.missing, stored)


def scaling_study(nodes: str | int | list[int] | tuple[int, ...] = (1, 2, 4), *,
                  timeout: float | None = None, progress: bool = True, store: bool = True,
                  db: Path | str | None = None, **options: Any) -> ScalingStudy:
    """``pctk bench scaling`` from Python: :func:`scaling_job`, then :func:`run_scaling`."""
    return run_scaling(scaling_job(nodes, **options), timeout=timeout, progress=progress,
                       store=store, db=db)


def summarise(job: scaling.ScalingJob, records: list[dict[str, Any]], db: Path | None,
              use_store: bool) -> tuple[dict[str, Any], list[Path]]:
    """The study (prediction and diagnosis per size, against the store's busbw records when
    it is used), its record and its PNGs."""
    from toolkit.results import plots  # matplotlib

    reader = None
    if use_store:
        try:
            reader = ResultStore(db, writer=False)
        except PctkError as exc:  # the study goes on without them, as with store=False
            print(f"pctk: warning: no stored busbw records for the prediction "
                  f"({exc.one_line()})", file=sys.stderr)
    try:
        result = study(records, strong=job.strong, store=reader)
    finally:
        if reader is not None:
            reader.close()
    rec = scaling_record(records, result, scaling.study_params(job, records, result["mode"]))
    return rec, plots.write_scaling_pngs(rec, job.run_dir)
