"""The one module that runs Slurm's commands for jobs and nodes.

``sbatch``, ``squeue``, ``sacct``, ``sacctmgr``, ``scontrol``, ``scancel`` and ``sinfo`` are
run here and nowhere else in the driver. Everything a launcher, ``pctk submit``, ``pctk
jobs/logs/cancel``, the health sweep, the submitit watcher, the metrics collector and the
local twin (its start-up probes, power programs and faults) need is a small function in one
of the blocks below: running a command, the state vocabulary, whether accounting answers,
submitting, job state, the one wait loop, cluster queries, node administration, the twin's
daemons. The node side has its own counterpart, ``benchmarks/slurmnode.py`` (it cannot
import this package).

Job state works with or without accounting: ``sacct`` when it answers on this cluster, else
``squeue --states=all`` (which still knows jobs that ended within ``MinJobAge``); a second
call only when sacct just failed or shows a state that a requeue may undo.

Slurm versions: the twin runs Debian's 22.05 or a built 24.11 (toolkit.local.slurmimage;
ParallelCluster 3.14 ships 24.11.5, 3.16 ships 25.11). Only flags present in all of them are
used, output is read as plain ``|``-separated text or as named ``Key=value`` fields, and every
field read here is the same in 22.05 and 24.11. What does differ is not read here: ``scontrol
show job`` says ``TRES=`` in 22.05 and ``ReqTRES=``/``AllocTRES=`` in 24.11 (jobs' TRES come
from sacct's AllocTRES); a node gains ``ResumeAfterTime`` and loses ``ExtSensors*``; the config
loses ``LaunchType`` and gains ``CertmgrType``; a pending job's Priority differs.
tests/twin/test_slurm_release.py holds every reading of this module equal on both releases.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from toolkit.errors import PctkError

# --------------------------------------------------------------------- the state vocabulary
GONE = "GONE"  # Slurm no longer knows a job it had shown (purged past MinJobAge)
# controller states of a job that has not ended (a requeued one shows PENDING or REQUEUED)
ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
          "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED",
          "RESV_DEL_HOLD")
# states in which a job has ended (a requeued job shows REQUEUED or PENDING instead)
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED", GONE)
# sacct states after which Slurm may requeue the job (the controller knows whether it did)
MAY_REQUEUE = ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL")
# ended from outside (Slurm cancelled or lost it): no result file is coming
NO_RESULT = ("CANCELLED", "NODE_FAIL", GONE, "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL",
             "DEADLINE")
OK_STATES = ("COMPLETED",)


def is_active(state: str | None) -> bool:
    """A known state of a job that has not ended (``CANCELLED by 0`` has ended)."""
    return bool(state) and str(state).upper().startswith(ACTIVE)


def has_ended(state: str | None) -> bool:
    """A known state of a job that has ended; None (not known yet) has not."""
    return bool(state) and not is_active(state)


# --------------------------------------------------------------------- running a command
NO_SLURM_HINT = ("run on a Slurm head or login node, or start the twin (`pctk local up`) "
                 "and `eval \"$(pctk local env)\"`")


def run(argv: list[str], *, timeout: float = 60, env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command; a missing binary or no answer is a one-line PctkError."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=dict(env) if env is not None else None, cwd=cwd)
    except FileNotFoundError:
        raise PctkError(f"{argv[0]} not found", NO_SLURM_HINT) from None
    except subprocess.TimeoutExpired:
        raise PctkError(f"{' '.join(argv[:3])} gave no answer in {timeout:g} s",
                        "is slurmctld up? (scontrol ping)") from None


NO_ANSWER = -1  # the exit status ask() gives a command that is missing or did not answer


def ask(argv: list[str], *, timeout: float = 60, env: Mapping[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """Run a Slurm query that must not raise: no binary or no answer reads as a failed call
    (exit status ``NO_ANSWER``, the reason on stderr)."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=dict(env) if env is not None else None)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, NO_ANSWER, "", str(exc))


def error_line(r: subprocess.CompletedProcess[str], command: str | None = None) -> str:
    """The one line that says why a Slurm command failed: its last message, without the
    ``sinfo: error:`` prefix (Slurm prints the chain of causes first, the verdict last)."""
    command = command or str(r.args[0] if isinstance(r.args, list | tuple) else r.args)
    lines = [ln.strip() for ln in (r.stderr or r.stdout or "").splitlines() if ln.strip()]
    if not lines:
        return f"exit {r.returncode}"
    return lines[-1].removeprefix(f"{command}: error: ").removeprefix(f"{command}: fatal: ")


# --------------------------------------------------------------------- accounting
RECHECK_S = 60.0  # after a failed sacct call, try sacct again this much later
_ACCOUNTING: dict[str, bool] = {}  # cluster (SLURM_CONF) -> whether sacct works there
_SACCT_FAILED_AT: dict[str, float] = {}  # cluster -> when sacct last failed for a passing cause


def env_for(slurm_conf: str) -> dict[str, str]:
    """This process's environment pointed at one cluster ("" = the system's Slurm)."""
    env = dict(os.environ)
    if slurm_conf:
        env["SLURM_CONF"] = slurm_conf
    else:
        env.pop("SLURM_CONF", None)
    return env


def cluster_key(slurm_conf: str | None) -> str:
    return os.environ.get("SLURM_CONF", "") if slurm_conf is None else slurm_conf


def note_sacct(slurm_conf: str | None, ok: bool, stderr: str = "") -> None:
    """Record how a sacct call went on a cluster: every sacct caller reports here."""
    key = cluster_key(slurm_conf)
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
    key = cluster_key(slurm_conf)
    if key not in _ACCOUNTING:
        r = ask(["sacct", "-n", "-X", "-j", "1", "-o", "JobID"], timeout=30, env=env_for(key))
        note_sacct(key, r.returncode == 0, r.stderr)
    failed_at = _SACCT_FAILED_AT.get(key)
    if failed_at is not None and time.monotonic() - failed_at >= RECHECK_S:
        return True
    return _ACCOUNTING[key]


# --------------------------------------------------------------------- submission
def parse_job_id(stdout: str) -> str:
    """The job id ``sbatch --parsable`` printed (``123`` or ``123;cluster``)."""
    job_id = stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise PctkError(f"sbatch printed no job id: {stdout.strip()!r}")
    return job_id


# what a Slurm client prints when slurmctld does not answer (killed, restarting, another
# host's controller unreachable): no option of the job is at fault then
NO_CONTROLLER = ("Unable to contact slurm controller", "Transport endpoint is not connected",
                 "Connection refused", "slurm_load_", "Socket timed out",
                 "Communication connection failure", "Zero Bytes were transmitted")
NO_CONTROLLER_HINT = ("check the controller with `pctk local status` (the twin) or `sinfo` "
                      "(a cluster), then submit again")


def controller_unreachable(stderr: str) -> bool:
    """Whether a Slurm client's error says slurmctld did not answer."""
    return any(text in stderr for text in NO_CONTROLLER)


def _sbatch_hint(stderr: str, hint: str | None) -> str:
    if "configuration source" in stderr or "slurm.conf" in stderr:
        return ("sbatch finds no Slurm configuration: start the twin with `pctk local up`, "
                "or run on the head node")
    return hint or "check the partition, node count and GPUs against `sinfo`"


def sbatch(args: list[str], *, env: Mapping[str, str] | None = None,
           cwd: str | os.PathLike[str] | None = None, hint: str | None = None) -> str:
    """``sbatch --parsable ARGS``; returns the job id or raises a one-line PctkError
    (``hint``: what to check when Slurm refuses the job)."""
    r = run([*SBATCH, *args], env=env, cwd=cwd)
    if r.returncode != 0 and controller_unreachable(r.stderr):
        raise PctkError(f"the Slurm controller (slurmctld) is not answering: "
                        f"{error_line(r, 'sbatch')}", NO_CONTROLLER_HINT)
    if r.returncode != 0:
        shape = partition_summary(partition_of(args, cwd))
        raise PctkError(f"sbatch refused the job: {error_line(r, 'sbatch')}",
                        _sbatch_hint(r.stderr, hint) + (f" ({shape})" if shape else ""))
    job_id = parse_job_id(r.stdout)
    SUBMITTED.append(job_id)
    return job_id


def partition_of(args: list[str], cwd: str | os.PathLike[str] | None = None) -> str | None:
    """The partition sbatch ``args`` ask for: ``--partition``/``-p``, else the script's own
    ``#SBATCH --partition`` line; None when neither names one."""
    for i, a in enumerate(args):
        if a.startswith("--partition="):
            return a.split("=", 1)[1]
        if a in ("-p", "--partition") and i + 1 < len(args):
            return args[i + 1]
    scripts = [a for a in args if not a.startswith("-")]
    if not scripts:
        return None
    path = os.path.join(cwd or "", scripts[0])
    with contextlib.suppress(OSError, UnicodeDecodeError), open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith("#"):
                break
            if line.startswith("#SBATCH --partition="):
                return line.split("=", 1)[1].strip()
    return None


def gres_gpus(gres: str) -> int:
    """GPUs in sinfo's %G (``gpu:h100:8``, ``gpu:8(S:0-1)``, ``(null)``)."""
    return sum(int(p[-1]) for item in gres.split(",")
               if (p := item.split("(")[0].split(":"))[0] == "gpu" and p[-1].isdigit())


def partition_summary(partition: str | None) -> str | None:
    """What a refused job's partition offers: ``cpu has 8 nodes of 2 CPUs, 2 GiB and no
    GPU`` (sizes differ: the smallest and largest); None when Slurm does not say."""
    if not partition:
        return None
    rows = [n for n in partition_nodes(partition) if n["cpus"].isdigit()]
    if not rows:
        return None

    def span(values: list[float], unit: str) -> str:
        low, high = min(values), max(values)
        return f"{low:g}{unit}" if low == high else f"{low:g}-{high:g}{unit}"

    cpus: list[float] = [int(n["cpus"]) for n in rows]
    gib: list[float] = [round(int(n["memory"]) / 1024, 1) for n in rows
                        if n["memory"].isdigit()]
    gpu: list[float] = [gres_gpus(n["gres"]) for n in rows]
    return (f"{partition} has {len(rows)} node(s) of {span(cpus, ' CPUs')}"
            + (f", {span(gib, ' GiB')}" if gib else "")
            + (" and no GPU" if not any(gpu) else f" and {span(gpu, ' GPUs')}"))


# every job this process submitted, in order: a long command stopped by Ctrl-C or SIGTERM
# names those still queued or running (toolkit.submit.longrun)
SUBMITTED: list[str] = []


SBATCH = ("sbatch", "--parsable")  # every submission: the job id alone on stdout


def sbatch_command(script: str | os.PathLike[str], *options: str,
                   script_args: Iterable[str] = ()) -> list[str]:
    """``sbatch --parsable OPTIONS SCRIPT ARGS``, to show, or to run with :func:`submit` (or
    by submitit, reading the output with :func:`parse_job_id`)."""
    return [*SBATCH, *options, str(script), *script_args]


def submit(command: list[str], *, env: Mapping[str, str] | None = None,
           hint: str | None = None) -> str:
    """Run a :func:`sbatch_command`; returns the job id."""
    if tuple(command[: len(SBATCH)]) != SBATCH:
        raise ValueError(f"not an sbatch_command: {command[:2]}")
    return sbatch(command[len(SBATCH):], env=env, hint=hint)


def sbatch_test_only(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``sbatch --test-only ARGS --wrap true``: would the scheduler ever run it? Nothing is
    submitted; no sbatch or no answer has the exit status ``NO_ANSWER``."""
    return ask(["sbatch", "--test-only", *args, "--wrap", "true"])


def cancel(*job_ids: str, check: bool = False, env: Mapping[str, str] | None = None) -> None:
    """``scancel``; with ``check``, a refusal is a one-line PctkError (else ignored: the job
    may have ended on its own)."""
    argv = ["scancel", *job_ids]
    r = run(argv, env=env) if check else ask(argv, env=env)
    if check and r.returncode != 0:
        raise PctkError(f"scancel failed: {error_line(r)}")


# --------------------------------------------------------------------- job state
SQUEUE_FORMAT = "%i|%T|%N"


def squeue_command(ids: Iterable[str]) -> list[str]:
    """One squeue call for many jobs, as ``JobID|State|NodeList`` rows (the watcher's)."""
    return ["squeue", "--states=all", "-h", "-o", SQUEUE_FORMAT, "-j", ",".join(sorted(ids))]


def is_squeue(command: list[str]) -> bool:
    return bool(command) and command[0] == "squeue"


def _last_state(r: subprocess.CompletedProcess[str]) -> str | None:
    if r.returncode != 0:
        return None
    states = [line.split("|")[0].split()[0] for line in r.stdout.splitlines() if line.strip()]
    return states[-1] if states else None


def _controller(job_id: str) -> subprocess.CompletedProcess[str]:
    return ask(["squeue", "--states=all", "-h", "-j", job_id, "-o", "%T|%r"])


def job_state(job_id: str) -> str | None:
    """The job's state (``PENDING``, ``COMPLETED``, ``CANCELLED``...), or None if Slurm does
    not know it (not yet in the accounting database, or purged from the controller).

    sacct when accounting answers; if that call fails (slurmdbd down), squeue at once. A
    sacct state after which Slurm may requeue the job (``NODE_FAIL``...) is checked with the
    controller, which shows a requeued job ``PENDING`` again.
    """
    if accounting_available():
        r = ask(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State"])
        note_sacct(None, r.returncode == 0, r.stderr)
        if r.returncode == 0:
            state = _last_state(r)
            if not (state and state.startswith(MAY_REQUEUE)):
                return state
            now = _last_state(_controller(job_id))
            return now if now and now.startswith(ACTIVE) else state
    return _last_state(_controller(job_id))


def job_reason(job_id: str) -> tuple[str, str]:
    """(state, reason) from the controller's memory (no accounting needed): why a job
    waits (``Resources``, ``PartitionConfig``...); ``(GONE, "")`` once it was purged."""
    r = _controller(job_id)
    rows = [ln.split("|", 1) for ln in r.stdout.splitlines() if ln.strip()]
    if r.returncode != 0 or not rows:
        return GONE, ""
    state, reason = (rows[-1] + [""])[:2]
    return state.strip(), "" if reason.strip() == "None" else reason.strip()


def controller_jobs(job_ids: Iterable[str], timeout: float = 8
                    ) -> tuple[set[str] | None, str]:
    """The jobs (array job ids for array tasks) among these that slurmctld holds now, in
    one squeue call; ``(None, why)`` when the controller does not answer."""
    mains = sorted({j.split("_")[0] for j in job_ids})
    # a controller that is down makes squeue retry for MessageTimeout (60 s on the twin)
    r = ask(["squeue", "--states=all", "-h", "-j", ",".join(mains), "-o", "%F|%i"],
            timeout=timeout)
    if r.returncode == NO_ANSWER:
        return None, f"squeue had no answer in {timeout:g} s"
    if r.returncode != 0 and "Invalid job id" not in r.stderr:
        return None, error_line(r)
    held: set[str] = set()
    for line in r.stdout.splitlines():
        held.update(x.strip().split("_")[0] for x in line.split("|") if x.strip())
    return held & set(mains), ""


def job_is_queued(job_id: str) -> bool:
    """Whether the controller still lists the job as pending or running."""
    r = ask(["squeue", "-h", "-j", job_id.split("_")[0], "-o", "%T"])
    return r.returncode == 0 and bool(r.stdout.strip())


def job_stdout(job_id: str) -> str | None:
    """The StdOut path the controller holds for a job, if it still knows the job."""
    r = ask(["scontrol", "show", "job", job_id])
    for token in r.stdout.split():
        if token.startswith("StdOut="):
            return token.split("=", 1)[1]
    return None


# --------------------------------------------------------------------- the wait loop
# The first gap between two polls; each next gap is GROWTH times longer, up to ``poll``: a job
# that ends within a second is seen within a fraction of one, a job of hours costs a few more
# calls in its first seconds and then one per ``poll``.
FIRST_GAP_S = 0.25
GROWTH = 1.5


def wait_jobs(job_ids: Iterable[str], *, read: Callable[[list[str]], Mapping[str, str | None]]
              | None = None, ended: Callable[[str, str | None], bool] | None = None,
              timeout: float | None = None, poll: float = 2.0,
              on_poll: Callable[[dict[str, str]], None] | None = None,
              until: Callable[[], bool] | None = None, tick: float | None = None
              ) -> tuple[dict[str, str], bool]:
    """Poll job states until every job has ended, ``until()`` holds, or ``timeout`` passes.

    The one wait loop of pctk: the benchmark launchers (through :func:`wait_job`), ``pctk
    submit --wait`` (``read`` = the submitit watcher's one call per poll) and the health
    sweep (``until`` = every node wrote its report) all run it.

    ``read(ids)`` gives each job's state (default :func:`job_state`, one call per job); a job
    Slurm stops knowing after it was seen is ``GONE``. ``ended(id, state)`` says whether a
    job is over (default :func:`has_ended`). ``on_poll`` hears the states after each poll.
    Polls come at once, then after gaps growing from :data:`FIRST_GAP_S` to ``poll`` seconds;
    ``until`` is checked every ``tick`` seconds (default ``poll``) between polls.
    Returns the last states and whether the time ran out.
    """
    ids = list(job_ids)
    read = read or (lambda js: {j: job_state(j) for j in js})
    ended = ended or (lambda _j, s: has_ended(s))
    tick = poll if tick is None else min(tick, poll)
    start = time.monotonic()
    seen: set[str] = set()
    states: dict[str, str] = {}
    next_poll = start
    gap = min(FIRST_GAP_S, poll)
    while True:
        if until is not None and until():
            return states, False
        now = time.monotonic()
        if now >= next_poll:
            for j, state in read(ids).items():
                if state is None and j in seen:
                    state = GONE
                if state:
                    seen.add(j)
                    states[j] = state
            if on_poll:
                on_poll(dict(states))
            if all(ended(j, states.get(j)) for j in ids):
                return states, False
            next_poll = now + gap
            gap = min(gap * GROWTH, poll)
        if timeout is not None and time.monotonic() - start >= timeout:
            return states, True
        time.sleep(max(0.0, min(tick, next_poll - time.monotonic())))


def wait_job(job_id: str, *, timeout: float | None, poll: float = 2.0,
             on_state: Callable[[str], None] | None = None) -> str:
    """Wait for one job to end (:func:`wait_jobs`); ``GONE`` when Slurm forgets a job it had
    shown. ``on_state`` hears every change of state. Past ``timeout`` seconds: a one-line
    PctkError (the job keeps running)."""
    last = [""]

    def changed(states: dict[str, str]) -> None:
        state = states.get(job_id, "")
        if state and state != last[0]:
            last[0] = state
            if on_state:
                on_state(state)

    states, timed_out = wait_jobs([job_id], timeout=timeout, poll=poll, on_poll=changed)
    if timed_out:
        raise PctkError(f"job {job_id} still {last[0] or 'unknown'} after {timeout:g} s",
                        f"it keeps running; wait longer (--timeout) or `squeue -j {job_id}`")
    return states[job_id]


# --------------------------------------------------------------------- job listings
SACCT = "sacct"


def sacct_rows(fields: list[str], *, since: str, user: str | None
               ) -> subprocess.CompletedProcess[str]:
    """``sacct -X -n -P`` rows of ``fields`` since a time, for one user or everyone."""
    return run([SACCT, "-X", "-n", "-P", "-S", since, "-o", ",".join(fields),
                *(["--user", user] if user else [])])


def squeue_rows(fmt: str, *, user: str | None, all_states: bool = False
                ) -> subprocess.CompletedProcess[str]:
    """``squeue -h -o FMT`` (with ``--states=all``: also jobs that ended recently)."""
    return run(["squeue", *(["--states=all"] if all_states else []), "-h", "-o", fmt,
                *(["--user", user] if user else [])])


# --------------------------------------------------------------------- cluster queries
@functools.lru_cache(maxsize=8)
def _config(slurm_conf: str) -> dict[str, str]:
    r = ask(["scontrol", "show", "config"], timeout=30)
    out = {}
    for line in r.stdout.splitlines():
        if " = " in line:
            k, v = line.split(" = ", 1)
            out[k.strip()] = v.strip()
    return out


def slurm_config() -> dict[str, str]:
    """``scontrol show config`` of the cluster SLURM_CONF points at (read once per cluster)."""
    return _config(os.environ.get("SLURM_CONF", ""))


def max_array_size() -> int:
    """The cluster's MaxArraySize (array indices run 0..MaxArraySize-1); Slurm's default 1001."""
    value = slurm_config().get("MaxArraySize", "1001")
    return int(value) if value.isdigit() else 1001


def array_chunks(indices: list[int], max_array: int) -> list[tuple[int, list[int]]]:
    """Array indices split into arrays Slurm accepts (every index below MaxArraySize, at most
    MaxArraySize tasks each): ``(base, indices - base)`` per array, so task ``i`` of an array
    is element ``base + i`` of the whole."""
    chunks = []
    for start in range(0, len(indices), max_array):
        part = indices[start : start + max_array]
        base = part[0] if part[-1] >= max_array else 0
        chunks.append((base, [i - base for i in part]))
    return chunks


def scontrol_fields(line: str) -> dict[str, str]:
    """One record of ``scontrol show ... -o`` (``Key=value`` words) as a dict; words without
    ``=`` (the rest of a value with spaces, such as a Reason) are left out."""
    return dict(tok.split("=", 1) for tok in line.split() if "=" in tok)


def partition_fields(partition: str) -> dict[str, str] | None:
    """``scontrol show partition -o`` as a dict; None when no answer."""
    r = ask(["scontrol", "show", "partition", "-o", partition], timeout=30)
    if r.returncode == NO_ANSWER:
        return None
    return scontrol_fields(r.stdout)


def sinfo_nodes(fields: str, timeout: float = 30) -> str:
    """``sinfo -N -h -O FIELDS``: one line per node and partition."""
    r = run(["sinfo", "-N", "-h", "-O", fields], timeout=timeout)
    if r.returncode != 0:
        raise PctkError(f"sinfo failed: {error_line(r)}", "check SLURM_CONF and slurmctld")
    return r.stdout


# --------------------------------------------------------------------- node administration
def _admin(argv: list[str], what: str) -> None:
    r = run(argv, timeout=30)
    if r.returncode != 0:
        raise PctkError(f"{what} failed: {error_line(r)}",
                        "check your Slurm permissions (drain/resume/reservations need an "
                        "operator or root)")


def drain(node: str, reason: str) -> None:
    _admin(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"],
           f"drain {node}")


def resume(node: str) -> None:
    _admin(["scontrol", "update", f"NodeName={node}", "State=RESUME"], f"resume {node}")


def create_reservation(name: str, nodes: list[str], minutes: int) -> None:
    """A maintenance reservation so nodes resumed for a re-check take no one else's job."""
    _admin(["scontrol", "create", "reservation", f"ReservationName={name}",
            f"Nodes={','.join(nodes)}", "StartTime=now", f"Duration={minutes}",
            f"Users={getpass.getuser()}", "Flags=MAINT,IGNORE_JOBS"],
           f"create reservation {name}")


def delete_reservation(name: str) -> None:
    ask(["scontrol", "delete", f"ReservationName={name}"], timeout=30)


# ---------------------------------------------------------------- read-only queries for metrics
# toolkit.observe reads the whole cluster once per scrape: one sinfo, one squeue, one sacct.
# Fields are '|'-separated (no Slurm name or reason we parse contains one).

OBSERVE_SINFO_FIELDS = "NodeList:|,Partition:|,StateComplete:|,Reason:|,Features:|,Gres:|,CPUs:|"
OBSERVE_SQUEUE_FORMAT = "%i|%T|%P|%r|%u|%a|%V"
OBSERVE_SACCT_FIELDS = "JobID,User,Account,Partition,ElapsedRaw,AllocTRES,State,NNodes,NodeList"
# states a job can end in (sacct -s): with -S/-E, jobs that ended inside the window
OBSERVE_ENDED_STATES = "CD,F,CA,TO,NF,OOM,PR,BF,DL"


def sinfo_node_rows(timeout: float = 30) -> str:
    """``sinfo -N`` with OBSERVE_SINFO_FIELDS: one line per node and partition."""
    return sinfo_nodes(OBSERVE_SINFO_FIELDS, timeout=timeout)


def squeue_job_rows(timeout: float = 30) -> str:
    """Every job slurmctld holds (all users and partitions), OBSERVE_SQUEUE_FORMAT."""
    r = run(["squeue", "-h", "-a", "-o", OBSERVE_SQUEUE_FORMAT], timeout=timeout)
    if r.returncode != 0:
        raise PctkError(f"squeue failed: {error_line(r)}", "check SLURM_CONF and slurmctld")
    return r.stdout


def sacct_ended_jobs(start: str, end: str = "now",
                     timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Allocations (no steps) of all users that ended between ``start`` and ``end``.

    Returned as is: a non-zero exit means no accounting here (or slurmdbd down), which the
    caller reports rather than raises.
    """
    return run(["sacct", "-a", "-X", "-n", "-P", "-S", start, "-E", end,
                "-s", OBSERVE_ENDED_STATES, "-o", OBSERVE_SACCT_FIELDS], timeout=timeout)


# ---------------------------------------------------------------- nodes (the twin's power
# programs and faults): scontrol/sinfo on node states, one call each
def _node_cmd(argv: list[str], env: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
    return ask(argv, env=env)


def update_nodes(nodes: list[str], *, env: dict[str, str] | None = None,
                 **fields: str) -> subprocess.CompletedProcess[str]:
    """``scontrol update NodeName=a,b State=... Reason=...`` (fields by Slurm's names)."""
    return _node_cmd(["scontrol", "update", f"NodeName={','.join(nodes)}",
                      *(f"{k}={v}" for k, v in fields.items())], env)


def slurmd_start_times(nodes: list[str], *, env: dict[str, str] | None = None
                       ) -> dict[str, float]:
    """{node: when slurmctld last heard its slurmd start (``SlurmdStartTime``, epoch s)};
    nodes it has never heard from, or that it does not know, are left out."""
    r = _node_cmd(["scontrol", "show", "node", "-o", ",".join(nodes)], env)
    out: dict[str, float] = {}
    for line in r.stdout.splitlines() if r.returncode == 0 else []:
        fields = scontrol_fields(line)
        with contextlib.suppress(KeyError, ValueError):
            out[fields["NodeName"]] = datetime.fromisoformat(fields["SlurmdStartTime"]
                                                             ).timestamp()
    return out


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


# ---------------------------------------------------------------- the twin's daemons: start-up
# probes, accounting registration, the whole queue (toolkit.local.twin); never raise
def ping(*, env: Mapping[str, str] | None = None, timeout: float = 30) -> bool:
    """``scontrol ping``: whether slurmctld answers."""
    return "UP" in ask(["scontrol", "ping"], env=env, timeout=timeout).stdout


def sacct_answers(*, env: Mapping[str, str] | None = None, timeout: float = 30) -> bool:
    """Whether ``sacct`` answers (slurmdbd up and the cluster registered)."""
    return ask(["sacct", "-n", "-X", "-o", "JobID"], env=env, timeout=timeout).returncode == 0


def sacctmgr_clusters(*, env: Mapping[str, str] | None = None) -> list[str] | None:
    """The clusters slurmdbd knows (``sacctmgr list cluster``); None when it does not answer."""
    r = ask(["sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster"], env=env, timeout=30)
    return r.stdout.split() if r.returncode == 0 else None


def sacctmgr_add_cluster(name: str, *, env: Mapping[str, str] | None = None) -> bool:
    """``sacctmgr -i add cluster NAME`` (needed before slurmctld can record jobs)."""
    r = ask(["sacctmgr", "-i", "add", "cluster", name], env=env, timeout=30)
    return r.returncode == 0


def queued_jobs(*, env: Mapping[str, str] | None = None) -> list[str] | None:
    """Ids of every job slurmctld holds (``squeue -h -o %A``); None when it does not answer."""
    r = ask(["squeue", "-h", "-o", "%A"], env=env, timeout=30)
    return [x for x in r.stdout.split() if x.isdigit()] if r.returncode == 0 else None


NODE_DETAILS = ("name", "partition", "state", "cpus", "gres", "reason")


def node_allocations(nodes: list[str]) -> dict[str, tuple[str, str]]:
    """node -> (State, AllocTRES) from ``scontrol show node -o``: what jobs hold on each
    node (``cpu=1,gres/gpu=8``; empty when nothing); {} when Slurm does not answer."""
    r = ask(["scontrol", "show", "node", "-o", ",".join(nodes)], timeout=30)
    out = {}
    for line in r.stdout.splitlines() if r.returncode == 0 else []:
        f = scontrol_fields(line)
        if f.get("NodeName"):
            out[f["NodeName"]] = (f.get("State", ""), f.get("AllocTRES", ""))
    return out


def partition_nodes(partition: str) -> list[dict[str, str]]:
    """The partition's nodes as configured, whatever their state (``sinfo -N -p``): name,
    state, cpus, memory (MiB), gres, reason; [] when Slurm does not answer."""
    keys = ("name", "state", "cpus", "memory", "gres", "reason")
    r = ask(["sinfo", "-h", "-N", "-p", partition, "-o", "%N|%T|%c|%m|%G|%E"], timeout=30)
    return [dict(zip(keys, (line.split("|", 5) + [""] * 6)[:6], strict=True))
            for line in (r.stdout.splitlines() if r.returncode == 0 else []) if line.strip()]


def node_details(*, env: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """One row per node and partition (``sinfo -N %N|%P|%T|%c|%G|%E``) with the keys of
    NODE_DETAILS; [] when Slurm does not answer."""
    r = ask(["sinfo", "-h", "-N", "-o", "%N|%P|%T|%c|%G|%E"], env=env, timeout=30)
    rows = []
    for line in r.stdout.splitlines() if r.returncode == 0 else []:
        row = dict(zip(NODE_DETAILS, (line.split("|") + [""] * 6)[:6], strict=True))
        row["partition"] = row["partition"].rstrip("*")
        rows.append(row)
    return rows
