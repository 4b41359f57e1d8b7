"""Job state for submitit, with or without Slurm accounting, one call per poll interval.

submitit asks ``sacct`` for the state of every watched job in one call. On a cluster without
accounting (no ``SlurmSettings/Database`` on ParallelCluster) sacct fails on every poll and a
job that died without writing a result is waited for forever. This watcher decides once per
cluster whether sacct works; if not it asks ``squeue --states=all`` (which still lists jobs
that ended in the last ``MinJobAge`` seconds), and a job that no command knows any more is
reported ``GONE`` - done - so submitit raises instead of waiting.

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
_ACCOUNTING: dict[str, bool] = {}


def _env_for(slurm_conf: str) -> dict[str, str]:
    env = dict(os.environ)
    if slurm_conf:
        env["SLURM_CONF"] = slurm_conf
    else:
        env.pop("SLURM_CONF", None)
    return env


def accounting_available(slurm_conf: str | None = None) -> bool:
    """Whether sacct answers on a cluster (default: the one SLURM_CONF points at); cached."""
    key = os.environ.get("SLURM_CONF", "") if slurm_conf is None else slurm_conf
    if key not in _ACCOUNTING:
        try:
            r = subprocess.run(["sacct", "-n", "-X", "-j", "1", "-o", "JobID"],
                               capture_output=True, text=True, timeout=30, env=_env_for(key))
            _ACCOUNTING[key] = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _ACCOUNTING[key] = False
    return _ACCOUNTING[key]


class PctkWatcher(SlurmInfoWatcher):
    """sacct when it works, else one squeue call; jobs nobody knows are GONE."""

    def __init__(self, delay_s: int = 10, slurm_conf: str | None = None) -> None:
        super().__init__(delay_s=delay_s)
        self.slurm_conf = os.environ.get("SLURM_CONF", "") if slurm_conf is None else slurm_conf
        self.commands: list[list[str]] = []  # every command run, for tests and --verbose

    def _pending(self) -> set[str]:
        return {x.split("_")[0] for x in self._registered - self._finished}

    def _make_command(self) -> list[str] | None:
        ids = self._pending()
        if not ids:
            return None
        if accounting_available(self.slurm_conf):
            cmd = super()._make_command()
        else:
            cmd = ["squeue", "--states=all", "-h", "-o", "%i|%T|%N", "-j", ",".join(sorted(ids))]
        if cmd:
            self.commands.append(cmd)
        return cmd

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
            info = self.read_info("JobID|State|NodeList\n" + r.stdout)
            # squeue --states=all lists every job the controller still holds: any other
            # watched job has ended so long ago that it was purged
            if r.returncode == 0 or "Invalid job id" in r.stderr:
                for job_id in self._registered - self._finished:
                    if job_id not in info and job_id.split("_")[0] not in _mains(info):
                        info[job_id] = {"JobID": job_id, "State": GONE, "NodeList": ""}
            self._info_dict.update(info)
        elif r.returncode == 0:
            self._output = r.stdout.encode()
            self._info_dict.update(self.read_info(r.stdout))
        self._last_status_check = time.time()
        for job_id in self._registered - self._finished:
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)


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
