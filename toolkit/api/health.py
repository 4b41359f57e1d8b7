"""The health sweep and the slow-node finder from Python, as ``pctk health run`` and ``pctk
health slow-nodes`` run them: the same options and defaults, the cluster in use found by
itself, a progress line, the record written to the run folder and then stored, and an
interrupt that names the jobs left running (:class:`toolkit.submit.longrun.StoppedWaiting`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.record import write_record
from benchmarks.vocab import parse_bytes
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_json
from toolkit.health import report, slownodes
from toolkit.health.inventory import HealthInputError
from toolkit.health.sweep import SweepOptions, SweepResult, run_sweep
from toolkit.paths import health_dir
from toolkit.progress import ProgressLines
from toolkit.results.ingest import Ingested, store_finished_run
from toolkit.submit.longrun import long_run


@dataclass(frozen=True)
class HealthRun:
    """A finished health sweep: the node x check result, its record and where it is, the
    Nagios exit code (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN) and what was stored."""

    result: SweepResult
    record: dict[str, Any]
    record_path: Path
    stored: list[Ingested] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return int(self.result.exit_code)


@dataclass(frozen=True)
class SlowNodes:
    """A finished slow-node sweep: each node's verdict (``result``), the record, the folder
    of the pair records, the exit code (0 all OK, 1 a node SLOW, FAIL or UNRESOLVED)."""

    result: slownodes.SweepResult
    record: dict[str, Any]
    record_path: Path
    folder: Path
    stored: list[Ingested] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return slownodes.exit_code(self.result)


def _store(path: Path, store: bool, db: Path | str | None) -> list[Ingested]:
    if not store:
        return []
    item = store_finished_run(path, None if db is None else Path(db))
    return [item] if item is not None else []


def health_run(
    nodes: str | None = None, *, partition: str | None = None, level: str = "quick",
    drain: bool = False, max_drain: int | None = None, resume_healthy: bool = False,
    mounts: list[str] | None = None, tool_path: list[str] | None = None,
    checks: list[str] | str | None = None, dcgm_level: int = 1,
    workdir: Path | str | None = None, run_dir: Path | str | None = None,
    timeout: float | None = None, python: str | None = None, out: Path | str | None = None,
    progress: bool = True, store: bool = True, db: Path | str | None = None,
) -> HealthRun:
    """``pctk health run``: the checks of ``level`` on ``nodes`` (a Slurm host list) or the
    ``partition``, one Slurm job per partition; ``drain`` drains the nodes that fail (their
    own evidence only, at most ``max_drain``). ``out``: also write the record there."""
    if isinstance(checks, str):
        checks = [c.strip() for c in checks.split(",") if c.strip()]
    opts = SweepOptions(
        nodes=nodes, partition=partition, level=level, drain=drain,
        resume_healthy=resume_healthy, mounts=list(mounts) if mounts else None,
        tool_path=list(tool_path or []), checks=checks or None, dcgm_level=dcgm_level,
        workdir=None if workdir is None else Path(workdir), timeout_s=timeout,
        max_drain=max_drain, run_dir=Path(run_dir).absolute() if run_dir else None)
    if python:
        opts.python = python
    with long_run(), ProgressLines("health sweep", quiet=not progress) as line:
        opts.progress = line.update
        result = run_sweep(opts)
    record = report.to_record(result)  # one id for every copy, so it is stored once
    record_path = report.write(result, result.run_dir / "record.json", record)
    if out is not None:
        report.write(result, Path(out), record)
    return HealthRun(result, record, record_path, _store(record_path, store, db))


def slow_nodes(
    nodes: str | None = None, *, partition: str | None = None, method: str = "torch",
    collective: str = "all_reduce", size: str = "8M", iters: int = 10,
    threshold: float = 0.5, max_rounds: int | None = None, timeout: float = 300.0,
    drain: bool = False, workdir: Path | str | None = None, python: str | None = None,
    nccl_tests_dir: str | None = None, include_powered_down: bool = False,
    progress: bool = True, store: bool = True, db: Path | str | None = None,
) -> SlowNodes:
    """``pctk health slow-nodes``: pair the nodes, test every pair at once, re-pair the
    suspects with good nodes; a node below ``threshold`` of the median is SLOW (``drain``:
    drained, with its figure in the reason)."""
    if method not in ("torch", "nccl-tests"):
        raise PctkError(f"unknown --method {method!r}", "use torch or nccl-tests")
    if collective not in ("all_reduce", "sendrecv"):
        raise PctkError(f"unknown --collective {collective!r}", "use all_reduce or sendrecv")
    try:
        if parse_bytes(size) < 1:
            raise ValueError(f"{size!r} is zero bytes")
    except ValueError as exc:
        raise PctkError(f"--size: {exc}", "write sizes like 1M, 8M, 64M") from None
    if timeout <= 0:
        raise PctkError(f"--timeout {timeout:g} must be more than 0 seconds")
    test = slownodes.PairTest(method=method, collective=collective, size=size, iters=iters,
                              nccl_tests_dir=nccl_tests_dir)
    if python:
        test.python = python
    folder = (Path(workdir) if workdir else
              health_dir() / time.strftime("slow-nodes-%Y%m%d-%H%M%S")).absolute()
    try:
        with long_run(), ProgressLines("slow-node sweep", quiet=not progress) as line:
            result = slownodes.sweep_partition(
                nodes=nodes, partition=partition, test=test, workdir=folder,
                threshold=threshold, max_rounds=max_rounds, timeout=timeout, drain=drain,
                progress=line.update, include_powered_down=include_powered_down)
    except HealthInputError as exc:  # health run's Nagios UNKNOWN (3); here unusable (2)
        raise PctkError(exc.message, exc.hint) from None
    atomic_write_json(folder / "slow-nodes.json", result.to_json())
    # a record like every other run's, kept in the results history (`results list`)
    logs = sorted(p.name for p in folder.glob("r*.out"))
    record = slownodes.to_record(result, partition=result.partition, job_ids=result.job_ids,
                                 raw_logs=logs)
    record_path = write_record(folder / "record.json", record)
    return SlowNodes(result, record, record_path, folder, _store(record_path, store, db))
