"""Two Slurm calls every launcher needs: submit a batch script, and ask a job's state.

``job_state`` works with or without accounting: ``sacct`` when it answers on this cluster,
else ``squeue --states=all`` (which still knows jobs that ended within ``MinJobAge``); a
second call only when sacct just failed or shows a state that a requeue may undo.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

from toolkit.errors import PctkError
from toolkit.submit.watcher import ACTIVE, GONE, MAY_REQUEUE, accounting_available, note_sacct

# states in which a job has ended (a requeued job shows REQUEUED or PENDING instead)
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE", GONE)


def sbatch(args: list[str], *, env: dict[str, str] | None = None,
           cwd: str | os.PathLike[str] | None = None) -> str:
    """``sbatch --parsable ARGS``; returns the job id or raises a one-line PctkError."""
    try:
        r = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True,
                           env=env, cwd=cwd, timeout=60)
    except FileNotFoundError:
        raise PctkError("sbatch not found", "run on a Slurm login node, or start the twin "
                        "(`pctk local up`) and `eval \"$(pctk local env)\"`") from None
    except subprocess.TimeoutExpired:
        raise PctkError("sbatch did not answer within 60 s", "is slurmctld up? (sinfo)") from None
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        msg = lines[-1].removeprefix("sbatch: error: ") if lines else f"exit {r.returncode}"
        raise PctkError(f"sbatch refused the job: {msg}",
                        "check the partition, node count and GPUs against `sinfo`")
    job_id = r.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise PctkError(f"sbatch printed no job id: {r.stdout.strip()!r}")
    return job_id


def _ask(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _last_state(r: subprocess.CompletedProcess[str] | None) -> str | None:
    if r is None or r.returncode != 0:
        return None
    states = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
    return states[-1] if states else None


def job_state(job_id: str) -> str | None:
    """The job's state (``PENDING``, ``COMPLETED``, ``CANCELLED``...), or None if Slurm does
    not know it (not yet in the accounting database, or purged from the controller).

    sacct when accounting answers; if that call fails (slurmdbd down), squeue at once. A
    sacct state after which Slurm may requeue the job (``NODE_FAIL``...) is checked with the
    controller, which shows a requeued job ``PENDING`` again.
    """
    squeue = ["squeue", "--states=all", "-h", "-j", job_id, "-o", "%T"]
    if accounting_available():
        r = _ask(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State"])
        note_sacct(None, r is not None and r.returncode == 0, r.stderr if r else "")
        if r is not None and r.returncode == 0:
            state = _last_state(r)
            if not (state and state.startswith(MAY_REQUEUE)):
                return state
            now = _last_state(_ask(squeue))
            return now if now and now.startswith(ACTIVE) else state
    return _last_state(_ask(squeue))


def wait_job(job_id: str, *, timeout: float | None, poll: float = 2.0,
             on_state: Callable[[str], None] | None = None) -> str:
    """Poll ``job_state`` until the job ends; ``GONE`` when Slurm forgets a job it had shown.

    ``on_state`` hears every change of state. Past ``timeout`` seconds: a one-line PctkError
    (the job keeps running).
    """
    start = time.monotonic()
    seen, last = False, ""
    while True:
        state = job_state(job_id)
        if state is None and seen:
            state = GONE
        if state:
            seen = True
            if state != last and on_state:
                on_state(state)
            last = state
            if state.startswith(TERMINAL):
                return state
        if timeout is not None and time.monotonic() - start > timeout:
            raise PctkError(f"job {job_id} still {last or 'unknown'} after {timeout:g} s",
                            f"it keeps running; wait longer (--timeout) or `squeue -j {job_id}`")
        time.sleep(poll)


# ---------------------------------------------------------------- nodes (the twin's power
# programs and faults): scontrol/sinfo on node states, one call each
def _node_cmd(argv: list[str], env: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(argv, 124, "", str(e))


def update_nodes(nodes: list[str], *, env: dict[str, str] | None = None,
                 **fields: str) -> subprocess.CompletedProcess[str]:
    """``scontrol update NodeName=a,b State=... Reason=...`` (fields by Slurm's names)."""
    return _node_cmd(["scontrol", "update", f"NodeName={','.join(nodes)}",
                      *(f"{k}={v}" for k, v in fields.items())], env)


def expand_hostlist(hostlist: str, *, env: dict[str, str] | None = None) -> list[str]:
    """``gpu-st-p5-[1-3]`` -> its node names (``scontrol show hostnames``)."""
    r = _node_cmd(["scontrol", "show", "hostnames", hostlist], env)
    return r.stdout.split() if r.returncode == 0 else []


def node_states(*, env: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """{node: (state as sinfo shows it, with ~ # % suffixes; reason)}; {} when Slurm is down."""
    r = _node_cmd(["sinfo", "-h", "-N", "-o", "%N|%T|%E"], env)
    out: dict[str, tuple[str, str]] = {}
    if r.returncode == 0:
        for line in r.stdout.splitlines():
            name, state, reason = [*line.split("|", 2), "", ""][:3]
            out[name] = (state.strip().lower(), "" if reason == "none" else reason)
    return out
