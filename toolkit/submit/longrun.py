"""What every long command does around its work (``bench fsdp``, ``bench collectives``,
``bench storage``, ``bench inference``, ``bench nccl run``, ``health run``, ``health slow-nodes``).

* It finds the cluster as ``pctk submit`` and ``pctk jobs`` do: Slurm's own configuration
  when there is one, else the running twin (:func:`toolkit.submit.cluster.use_running_twin`),
  so nobody needs ``eval "$(pctk local env)"`` first.
* Ctrl-C, SIGTERM and SIGHUP (a service manager, a batch system, a closed terminal) stop the
  waiting, not the jobs: the command names each job it submitted that is still queued or
  running and how to cancel it, as ``pctk submit --wait`` does, and exits 130.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import typer

from toolkit import slurm
from toolkit.cliout import INTERRUPTED
from toolkit.submit.cluster import use_running_twin

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def stopped_message(job_ids: list[str]) -> str:
    """The one line a stopped long command prints (empty list: nothing left running)."""
    if not job_ids:
        return "pctk: interrupted; no job of this command is left running"
    ids = " ".join(job_ids)
    jobs = f"job {ids} keeps" if len(job_ids) == 1 else f"jobs {ids} keep"
    return f"pctk: stopped waiting; {jobs} running. Cancel with: pctk cancel {ids}"


def still_queued(job_ids: list[str]) -> list[str]:
    """Those of ``job_ids`` the controller still lists as pending or running."""
    return [j for j in job_ids if slurm.job_is_queued(j)]


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """In the body, SIGTERM and SIGHUP raise KeyboardInterrupt as Ctrl-C does (their default
    would end the process silently, exit 143, leaving jobs nobody is told about); a second
    signal while the first is handled gets the caller's handler back."""
    old: dict[signal.Signals, Any] = {}
    try:
        for sig in STOP_SIGNALS:
            old[sig] = signal.signal(sig, _interrupt)
    except ValueError:  # not the main thread (a library caller): leave signals alone
        pass
    try:
        yield
    finally:
        for stop, handler in old.items():
            signal.signal(stop, handler)


class StoppedWaiting(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) while a long run waited: ``job_ids`` are the jobs it
    submitted that are still queued or running, and its message says how to cancel them."""

    def __init__(self, job_ids: list[str]) -> None:
        self.job_ids = job_ids
        super().__init__(stopped_message(job_ids).removeprefix("pctk: "))


@contextmanager
def long_run() -> Iterator[None]:
    """What every long run does, from Python or the CLI: find the cluster, run the body, and
    turn Ctrl-C, SIGTERM or SIGHUP into :class:`StoppedWaiting`, naming the jobs it
    submitted that keep running (a notebook's interrupt names them too)."""
    use_running_twin()
    first = len(slurm.SUBMITTED)
    try:
        with stop_signals_interrupt():
            yield
    except StoppedWaiting:
        raise
    except KeyboardInterrupt:
        raise StoppedWaiting(still_queued(slurm.SUBMITTED[first:])) from None


@contextmanager
def long_command() -> Iterator[None]:
    """:func:`long_run` for a command: on a stop, print which jobs keep running and exit 130."""
    try:
        with long_run():
            yield
    except StoppedWaiting as stop:
        print(stopped_message(stop.job_ids), file=sys.stderr)
        raise typer.Exit(INTERRUPTED) from None
