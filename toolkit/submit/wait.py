"""Wait for many jobs with a progress bar: one sacct/squeue call per poll, Ctrl-C safe.

The loop is :func:`toolkit.slurm.wait_jobs`; the states come from the submitit
watcher (one call per poll for every job). A job Slurm requeues (node failure, preemption)
is followed to its real end, and said so.

sacct answers from slurmdbd's database, which keeps a job PENDING or RUNNING for as long as
nobody tells it otherwise. So while a job is not over, the controller is asked too (one
squeue call per poll): when slurmctld does not answer, that is said once (and again when it
answers); when it answers twice in a row without the job, the job is ``GONE`` (a controller
that crashed before saving its state restarts without its newest jobs) and said so.
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
    gone: set[str] = set()
    unheld: dict[str, int] = {}  # job id -> polls in a row the controller did not hold it
    down = [""]  # why the controller does not answer ("" while it does)

    def ask_controller(states: dict[str, str | None]) -> None:
        active = [i for i, st in states.items()
                  if i not in gone and not watcher.is_done(i, mode="cache")]
        if not active:
            return
        held, why = slurm.controller_jobs(active)
        if held is None:
            if not down[0]:
                console.print(f"slurmctld is not answering ({why}); job states are unknown "
                              "until it is back: still waiting", highlight=False, soft_wrap=True)
            down[0] = why or "no answer"
            return
        if down[0]:
            console.print("slurmctld answers again", highlight=False, soft_wrap=True)
            down[0] = ""
        for i in active:
            unheld[i] = 0 if i.split("_")[0] in held else unheld.get(i, 0) + 1
            if unheld[i] >= 2:
                gone.add(i)
                console.print(f"job {i} is gone: slurmctld no longer holds it (a controller "
                              "that stopped before saving its state restarts without its "
                              f"newest jobs); accounting still says {states[i] or 'nothing'}",
                              highlight=False, soft_wrap=True)

    def read(job_ids: list[str]) -> dict[str, str | None]:
        watcher.update()
        for job_id in sorted(set(watcher.requeued) - told):
            told.add(job_id)
            after = watcher.requeued[job_id]
            why = "" if after == "REQUEUED" else f" after {after}"
            console.print(f"job {job_id} was requeued by Slurm{why}; waiting for its "
                          "new run", highlight=False, soft_wrap=True)
        # a job sacct does not list yet (just submitted) has no state: not "UNKNOWN"
        states = {i: watcher.get_info(i, mode="cache").get("State") or None for i in job_ids}
        ask_controller(states)
        return {i: slurm.GONE if i in gone else st for i, st in states.items()}

    def ended(job_id: str, _state: str | None) -> bool:
        return job_id in gone or watcher.is_done(job_id, mode="cache")

    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[states]}"), TimeElapsedColumn(), console=console,
                      disable=not show or not console.is_terminal, transient=False) as bar:
            task = bar.add_task("jobs", total=len(ids), states="")

            def shown(states: dict[str, str]) -> None:
                done = sum(ended(i, None) for i in ids)
                counts = Counter(states[i].split()[0] if states.get(i) else "SUBMITTED"
                                 for i in ids)
                summary = " ".join(f"{k.lower()}={v}" for k, v in sorted(counts.items()))
                bar.update(task, completed=done, states=summary)
                lines.update(f"{done}/{len(ids)} jobs done: {summary}")

            states, _ = slurm.wait_jobs(ids, read=read, ended=ended, timeout=timeout,
                                        poll=poll_s, on_poll=shown)
            final = {i: slurm.GONE if i in gone else states.get(i)
                     or watcher.get_state(i, mode="cache") for i in ids}
    except KeyboardInterrupt:
        raise StoppedWaiting(sorted({i.split("_")[0] for i in ids})) from None
    for job_id in sorted(watcher.requeued):
        console.print(ran_again_line(job_id, watcher.requeued[job_id], final.get(job_id)),
                      highlight=False, soft_wrap=True)
    return final


def ran_again_line(job_id: str, after: str, final: str | None) -> str:
    """What a user must know of a job Slurm requeued: it ran more than once, and what its
    earlier run did (files written, steps taken) before it was stopped was not undone."""
    why = "" if after == "REQUEUED" else f" after {after}"
    return (f"job {job_id} ran more than once: Slurm requeued it{why} and its last run ended "
            f"{final or 'in an unknown state'}; what an earlier run did before it was stopped "
            "is not undone (a job that must run at most once: submit it with --no-requeue; "
            "SLURM_RESTART_COUNT tells each run which it is)")
