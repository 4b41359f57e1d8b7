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
import subprocess
import time
import typing as tp
from pathlib import Path

from submitit.slurm.slurm import SlurmInfoWatcher, SlurmJob

GONE = "GONE"
RECHECK_S = 60.0  # after a failed sacct call, try sacct again this much later
# sacct states after which Slurm may requeue the job (the controller knows whether it did)
MAY_REQUEUE = ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL")
# controller states of a job that has not ended (a requeued one shows PENDING or REQUEUED)
ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
          "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED",
          "RESV_DEL_HOLD")
_ACCOUNTING: dict[str, bool] = {}  # cluster (SLURM_CONF) -> whether sacct works there
_SACCT_FAILED_AT: dict[str, float] = {}  # cluster -> when sacct last failed for a passing cause
SQUEUE_FORMAT = "%i|%T|%N"


def _env_for(slurm_conf: str) -> dict[str, str]:
    env = dict(os.environ)
    if slurm_conf:
        env["SLURM_CONF"] = slurm_conf
    else:
        env.pop("SLURM_CONF", None)
    return env


def _cluster(slurm_conf: str | None) -> str:
    return os.environ.get("SLURM_CONF", "") if slurm_conf is None else slurm_conf


def note_sacct(slurm_conf: str | None, ok: bool, stderr: str = "") -> None:
    """Record how a sacct call went on a cluster: every sacct caller reports here."""
    key = _cluster(slurm_conf)
    _ACCOUNTING[key] = ok
    if ok or "accounting storage is disabled" in stderr.lower():
        _SACCT_FAILED_AT.pop(key, None)  # works, or is not configured: no retry needed
    else:
        _SACCT_FAILED_AT[key] = time.monotonic()


def accounting_available(slurm_conf: str | None = None) -> bool:
    """Whether to ask sacct on a cluster (default: the one SLURM_CONF points at).

    Probed once; afterwards what the callers' own sacct calls showed (:func:`note_sacct`).
    After a passing failure it answers True again once ``RECHECK_S`` have passed, so the
    caller's next sacct call tells whether accounting is back.
    """
    key = _cluster(slurm_conf)
    if key not in _ACCOUNTING:
        try:
            r = subprocess.run(["sacct", "-n", "-X", "-j", "1", "-o", "JobID"],
                               capture_output=True, text=True, timeout=30, env=_env_for(key))
            note_sacct(key, r.returncode == 0, r.stderr)
        except (OSError, subprocess.TimeoutExpired) as exc:
            note_sacct(key, False, str(exc))
    failed_at = _SACCT_FAILED_AT.get(key)
    if failed_at is not None and time.monotonic() - failed_at >= RECHECK_S:
        return True
    return _ACCOUNTING[key]


def squeue_command(ids: tp.Iterable[str]) -> list[str]:
    return ["squeue", "--states=all", "-h", "-o", SQUEUE_FORMAT, "-j", ",".join(sorted(ids))]


class PctkWatcher(SlurmInfoWatcher):
    """sacct when it works, else one squeue call; jobs nobody knows are GONE."""

    def __init__(self, delay_s: int = 10, slurm_conf: str | None = None) -> None:
        super().__init__(delay_s=delay_s)
        self.slurm_conf = _cluster(slurm_conf)
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
        try:
            r = subprocess.run(command, capture_output=True, text=True, timeout=60,
                               env=_env_for(self.slurm_conf))
        except (OSError, subprocess.TimeoutExpired) as exc:
            r = subprocess.CompletedProcess(command, 1, "", str(exc))
        if command[0] == "squeue":
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


# states in which Slurm ended the job from outside: no result file is coming
_NO_RESULT = ("CANCELLED", "NODE_FAIL", GONE, "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")


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
        if self.watcher.get_state(self.job_id, mode="cache").startswith(_NO_RESULT):
            self._results_timeout_s = 2
        return super()._get_outcome_and_result()
