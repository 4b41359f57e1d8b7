"""Wait for many jobs with a progress bar: one sacct/squeue call per poll, Ctrl-C safe.

The loop is :func:`toolkit.slurm.wait_jobs`; the states come from the submitit
watcher (one call per poll for every job). A job Slurm requeues (node failure, preemption)
is followed to its real end, and said so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from toolkit import slurm
from toolkit.cliout import console as cli_console
from toolkit.progress import ProgressLines
from toolkit.slurm import OK_STATES  # noqa: F401  (imported from here by callers)
from toolkit.submit.watcher import PctkWatcher


class StoppedWaiting(Exception):
    """Ctrl-C while waiting: the jobs keep running."""

    def __init__(self, job_ids: list[str]):
        super().__init__("stopped waiting")
        self.job_ids = job_ids


def wait_for(task_ids: Iterable[str], *, poll_s: float = 5.0, console: Console | None = None,
             show: bool = True, timeout: float | None = None) -> dict[str, str]:
    """Block until every job/array task ends; returns final state per id."""
    ids = list(task_ids)
    watcher = PctkWatcher(delay_s=int(max(1, poll_s)))
    for i in ids:
        watcher.register_job(i)
    console = console or cli_console(stderr=True)
    # a bar off a terminal shows nothing until the end: plain lines there instead
    lines = ProgressLines("waiting", quiet=not show or console.is_terminal, terminal=False,
                          stream=console.file)
    told: set[str] = set()

    def read(job_ids: list[str]) -> dict[str, str | None]:
        watcher.update()
        for job_id in sorted(set(watcher.requeued) - told):
            told.add(job_id)
            after = watcher.requeued[job_id]
            why = "" if after == "REQUEUED" else f" after {after}"
            console.print(f"job {job_id} was requeued by Slurm{why}; waiting for its "
                          "new run", highlight=False)
        # a job sacct does not list yet (just submitted) has no state: not "UNKNOWN"
        return {i: watcher.get_info(i, mode="cache").get("State") or None for i in job_ids}

    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[states]}"), TimeElapsedColumn(), console=console,
                      disable=not show or not console.is_terminal, transient=False) as bar:
            task = bar.add_task("jobs", total=len(ids), states="")

            def shown(states: dict[str, str]) -> None:
                done = sum(watcher.is_done(i, mode="cache") for i in ids)
                counts = Counter(states[i].split()[0] if states.get(i) else "SUBMITTED"
                                 for i in ids)
                summary = " ".join(f"{k.lower()}={v}" for k, v in sorted(counts.items()))
                bar.update(task, completed=done, states=summary)
                lines.update(f"{done}/{len(ids)} jobs done: {summary}")

            states, _ = slurm.wait_jobs(
                ids, read=read, ended=lambda i, _s: watcher.is_done(i, mode="cache"),
                timeout=timeout, poll=poll_s, on_poll=shown)
            return {i: states.get(i) or watcher.get_state(i, mode="cache") for i in ids}
    except KeyboardInterrupt:
        raise StoppedWaiting(sorted({i.split("_")[0] for i in ids})) from None
