"""Job state for submitit, with or without Slurm accounting, one call per poll interval.

submitit asks ``sacct`` for the state of every watched job in one call. On a cluster without
accounting (no ``SlurmSettings/Database`` on ParallelCluster) sacct fails on every poll and a
job that died without writing a result is waited for forever. This watcher asks whether sacct
works on a cluster; if not it asks ``squeue --states=all`` (which still lists jobs that ended
in the last ``MinJobAge`` seconds), and a job that no command knows any more is reported
``GONE`` - done - so submitit raises instead of waiting.

Accounting can also die mid-wait (slurmdbd or its database down): a sacct call that fails
switches the cluster to squeue from the next poll on, and sacct is tried again, as that
poll's one call, once ``RECHECK_S`` have passed. Only "accounting storage is disabled"
(accounting not configured) settles the question for the life of the process.

A job Slurm requeues (after a node failure, a preemption, a failed boot) first shows in
sacct as ``NODE_FAIL``/``PREEMPTED``/``BOOT_FAIL`` for a few seconds, while the controller
already has it ``PENDING`` again. Such a state is confirmed with the controller (squeue, the
next poll's one call) before the job counts as done; a requeued job is followed to its real
end and named in :attr:`PctkWatcher.requeued`.

Job ids are only unique within one cluster, so there is one watcher per cluster (per
``SLURM_CONF``), and each job remembers the cluster it was submitted to: a notebook that talks
to the twin and to a real cluster never mixes their job 42s.
"""

from __future__ import annotations

import os
import time
import typing as tp
from pathlib import Path

from toolkit import slurm
from toolkit.slurm import (  # noqa: F401  (the names this module has always offered)
    _ACCOUNTING,
    ACTIVE,
    GONE,
    MAY_REQUEUE,
    NO_RESULT,
    RECHECK_S,
    SQUEUE_FORMAT,
    accounting_available,
    note_sacct,
    squeue_command,
)

# the base classes whose private bookkeeping this module uses, checked on import
from toolkit.submit.submitit_private import SlurmInfoWatcher, SlurmJob

if tp.TYPE_CHECKING:
    import subprocess


class PctkWatcher(SlurmInfoWatcher):
    """sacct when it works, else one squeue call; jobs nobody knows are GONE."""

    def __init__(self, delay_s: int = 10, slurm_conf: str | None = None) -> None:
        super().__init__(delay_s=delay_s)
        self.slurm_conf = slurm.cluster_key(slurm_conf)
        self.commands: list[list[str]] = []  # every command run, for tests and --verbose
        self.requeued: dict[str, str] = {}  # job id -> the state its earlier run ended in
        self._confirm: set[str] = set()  # sacct says MAY_REQUEUE: ask the controller
        self._ran: dict[str, str] = {}  # job id -> how its current run was last seen ending

    def _pending(self) -> set[str]:
        return {x.split("_")[0] for x in self._registered - self._finished}

    def _make_command(self) -> list[str] | None:
        ids = self._pending()
        if not ids:
            return None
        if not self._confirm and accounting_available(self.slurm_conf):
            cmd = super()._make_command()
        else:
            cmd = squeue_command(ids)
        if cmd:
            self.commands.append(cmd)
        return cmd

    def is_done(self, job_id: str, mode: str = "standard") -> bool:
        # submitit's own list of unfinished states lacks CONFIGURING (a dynamic node
        # powering up), SUSPENDED, REQUEUE_HOLD...: ACTIVE covers them
        done = super().is_done(job_id, mode=mode)
        state = self.get_state(job_id, mode="cache").upper()
        return done and not state.startswith(ACTIVE) and job_id not in self._confirm

    def update(self) -> None:
        command = self._make_command()
        if command is None:
            return
        self._num_calls += 1
        r = slurm.ask(command, env=slurm.env_for(self.slurm_conf))
        if slurm.is_squeue(command):
            self._read_squeue(r)
        else:
            note_sacct(self.slurm_conf, r.returncode == 0, r.stderr)
            if r.returncode == 0:
                self._output = r.stdout.encode()
                self._info_dict.update(self.read_info(r.stdout))
                self._confirm = {j for j in self._registered - self._finished
                                 if self.get_state(j, mode="cache").startswith(MAY_REQUEUE)}
        self._last_status_check = time.time()
        for job_id in self._registered - self._finished:
            self._note_requeue(job_id)
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)

    def _note_requeue(self, job_id: str) -> None:
        """A job seen running (or ending) and then pending again was requeued."""
        state = self.get_state(job_id, mode="cache")
        if state.startswith(("RUNNING", "COMPLETING")):
            self._ran.setdefault(job_id, "REQUEUED")
        elif state.startswith(MAY_REQUEUE):
            self._ran[job_id] = state.split()[0]
        elif state.startswith(("PENDING", "REQUEUE")) and job_id in self._ran:
            self.requeued.setdefault(job_id, self._ran.pop(job_id))

    def _read_squeue(self, r: subprocess.CompletedProcess[str]) -> None:
        info = self.read_info("JobID|State|NodeList\n" + r.stdout)
        answered = r.returncode == 0 or "Invalid job id" in r.stderr
        confirming, self._confirm = self._confirm, set()
        for job_id in confirming:
            listed = info.get(job_id, {}).get("State", "")
            if listed.startswith(ACTIVE):
                self.requeued.setdefault(job_id, self.get_state(job_id, mode="cache"))
            elif not listed and answered:
                # the controller no longer holds it: sacct's state is the end
                info[job_id] = self._info_dict.get(job_id, {})
            elif not answered:
                self._confirm.add(job_id)  # ask again
        if answered and not accounting_available(self.slurm_conf):
            # squeue --states=all lists every job the controller still holds: any other
            # watched job has ended so long ago that it was purged
            for job_id in self._registered - self._finished:
                if job_id not in info and job_id.split("_")[0] not in _mains(info):
                    info[job_id] = {"JobID": job_id, "State": GONE, "NodeList": ""}
        self._info_dict.update({k: v for k, v in info.items() if v})


def _mains(info: dict[str, dict[str, str]]) -> set[str]:
    return {k.split("_")[0] for k in info}


class PctkSlurmJob(SlurmJob[tp.Any]):
    _watchers: tp.ClassVar[dict[str, PctkWatcher]] = {}

    def __init__(self, folder: str | Path, job_id: str,
                 tasks: tp.Sequence[int] = (0,)) -> None:
        self._slurm_conf = os.environ.get("SLURM_CONF", "")  # before the base registers it
        super().__init__(folder, job_id, tasks)

    @property
    def watcher(self) -> PctkWatcher:  # type: ignore[override]
        """The watcher of the cluster this job was submitted to (one per cluster)."""
        key = getattr(self, "_slurm_conf", os.environ.get("SLURM_CONF", ""))
        if key not in PctkSlurmJob._watchers:
            PctkSlurmJob._watchers[key] = PctkWatcher(delay_s=10, slurm_conf=key)
        return PctkSlurmJob._watchers[key]

    def _get_outcome_and_result(self) -> tuple[str, tp.Any]:
        # submitit waits 15 s for a result file a slow shared filesystem may not show yet;
        # a job Slurm cancelled or lost never writes one, so report it at once
        if self.watcher.get_state(self.job_id, mode="cache").startswith(NO_RESULT):
            self._results_timeout_s = 2
        return super()._get_outcome_and_result()
