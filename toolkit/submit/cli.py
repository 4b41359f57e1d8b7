"""``pctk submit``, ``pctk jobs``, ``pctk logs``, ``pctk cancel``."""

from __future__ import annotations

import importlib
import os
import pwd
import re
import shlex
import sys
import time
from pathlib import Path

import typer
from rich.table import Table

from toolkit import slurm
from toolkit.cliout import FAILED, INTERRUPTED, JsonOption, emit_json, exit_with
from toolkit.cliout import console as cli_console
from toolkit.errors import PctkError
from toolkit.fsutil import NotRegularFile, open_regular_fd
from toolkit.submit.cluster import SYSTEM_SLURM_CONF, load_cluster, use_running_twin
from toolkit.submit.command import (
    CommandJob,
    describe_shape,
    job_from_cluster,
    jobs_dir,
    load_index,
    submit_command,
)
from toolkit.submit.executor import ClusterExecutor, max_array_size
from toolkit.submit.logfiles import find_logs, submitit_folder
from toolkit.submit.longrun import still_queued, stop_signals_interrupt, stopped_message
from toolkit.submit.wait import OK_STATES, StoppedWaiting, wait_for

# The job name comes last in what pctk jobs asks of sacct and squeue: it is the one field a
# user writes, and may hold "|" or a newline (names reach Slurm verbatim); last, it is split
# off whole and its lines joined back (_parse_rows)
JOB_FIELDS = ["JobID", "JobName", "State", "NNodes", "Elapsed", "ExitCode", "NodeList"]
SACCT_FIELDS = [f for f in JOB_FIELDS if f != "JobName"] + ["JobName"]
LIVE_FIELDS = ["JobID", "State", "NNodes", "Elapsed", "NodeList", "Reason", "JobName"]
LIVE_FORMAT = "%i|%T|%D|%M|%N|%r|%j"  # squeue, in LIVE_FIELDS order
ConfigOpt = typer.Option(None, "--config", "-c", help="Cluster config (default: the cluster "
                         "Slurm points at: $PCTK_CLUSTER_CONFIG, the twin, or ParallelCluster's).")


def _wait(task_ids: list[str], show: bool) -> dict[str, str]:
    """Wait with a progress bar; Ctrl-C, SIGTERM or SIGHUP stop the waiting, not the jobs:
    say which keep running and how to cancel them, exit 130 (as every long command does)."""
    try:
        with stop_signals_interrupt():
            return wait_for(task_ids, poll_s=2, show=show)
    except (StoppedWaiting, KeyboardInterrupt):
        jobs = sorted({i.split("_")[0] for i in task_ids})  # an array's tasks: its job
        print(stopped_message(still_queued(jobs)), file=sys.stderr)
        raise typer.Exit(INTERRUPTED) from None


def submit(
    command: list[str] = typer.Argument(None, help="The command and its arguments, after --."),
    queue: str = typer.Option(None, "--queue", "-q", help="Queue (Slurm partition) "
                              "(default: the config's first)."),
    nodes: int = typer.Option(1, "--nodes", "-N", min=1, help="Number of nodes."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", "-G", min=0,
                                      help="GPUs per node (default: all the instance has)."),
    tasks_per_node: int = typer.Option(None, "--tasks-per-node", min=1,
                                       help="Tasks per node (default: one per GPU, else 1)."),
    time_limit: str = typer.Option("60", "--time", "-t", help="Time limit: minutes or "
                                   "[D-]HH:MM[:SS]."),
    array: str = typer.Option(None, "--array", "-a", help="Array indices: 0-99, 0-99:2, "
                              "1,5,7, with %LIMIT for concurrency. Split past MaxArraySize."),
    name: str = typer.Option(None, "--name", "-J", help="Job name (passed verbatim)."),
    fn: str = typer.Option(None, "--fn", help="Run module:function (arguments: the strings "
                           "after --) through submitit instead of a command."),
    torchrun: bool = typer.Option(False, "--torchrun", help="Launch with torchrun, one per "
                                  "node, c10d rendezvous on the first node."),
    nccl_debug: bool = typer.Option(False, "--nccl-debug", help="Set NCCL_DEBUG=INFO."),
    wait: bool = typer.Option(False, "--wait", "-w", help="Wait for the end with a progress "
                              "bar; exit 1 if any task did not complete."),
    config: str = ConfigOpt,
    json_out: bool = JsonOption,
) -> None:
    """Submit a command (multi-node aware: srun across nodes) or a Python function.

    Examples: pctk submit -q gpu -N 2 -- python train.py --lr 3e-4 ;
    pctk submit --array 0-999%50 -- python sweep.py ; pctk submit --fn mymod:main --wait
    """
    use_running_twin()
    topo = load_cluster(config)
    qname, efa, itype, gpus = job_from_cluster(topo, queue, gpus_per_node, nodes)
    if fn:
        _submit_function(fn, command or [], topo, qname, nodes, gpus, time_limit, name, wait,
                         json_out)
        return
    if not command:
        raise PctkError("no command given", "put it after --, e.g. pctk submit -- python train.py")

    job = CommandJob(argv=list(command), queue=qname, nodes=nodes, gpus_per_node=gpus,
                     tasks_per_node=tasks_per_node, time=time_limit, name=name, array=array,
                     torchrun=torchrun, efa=efa, nccl_debug=nccl_debug,
                     exclusive=bool(gpus) and gpus == (gpus_per_node or gpus), instance_type=itype)
    sub = submit_command(job, max_array=max_array_size())
    if json_out and not wait:
        emit_json(sub.to_json(), indent=None, sort_keys=False)
        return
    if not json_out:
        print(f"submitted {' '.join(sub.job_ids)} ({describe_shape(job, sub)}) to {qname}; "
              f"logs in {sub.folder}")
    if sub.note and not json_out:
        print(f"pctk: {sub.note}", file=sys.stderr)
    if wait:
        states = _wait(sub.task_ids, show=not json_out)
        bad = {k: v for k, v in states.items() if not v.startswith(OK_STATES)}
        if json_out:
            emit_json({**sub.to_json(), "states": states}, indent=None, sort_keys=False)
        elif bad:
            print(f"{len(bad)} of {len(states)} task(s) did not complete: "
                  + ", ".join(f"{k}={v}" for k, v in list(bad.items())[:10]), file=sys.stderr)
        if bad:
            exit_with(FAILED)


def _submit_function(spec: str, args: list[str], topo, qname: str, nodes: int, gpus: int,
                     time_limit: str, name: str | None, wait: bool, json_out: bool) -> None:
    if ":" not in spec:
        raise PctkError(f"--fn {spec!r} is not module:function", "e.g. --fn mypkg.train:main")
    mod_name, func_name = spec.split(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        func = getattr(importlib.import_module(mod_name), func_name)
    except (ImportError, AttributeError) as exc:
        raise PctkError(f"cannot load {spec}: {exc}", "check the module path and name") from None

    minutes = int(time_limit) if time_limit.isdigit() else 60
    folder = jobs_dir() / "submitit"
    ex = ClusterExecutor(folder, cluster=topo, queue=qname, nodes=nodes,
                         gpus_per_node=gpus or None, timeout_min=minutes,
                         job_name=name or func_name)
    job = ex.submit(func, *args)  # the executor records its log folder for `pctk logs`
    if not wait:
        if json_out:
            emit_json({"job_ids": [job.job_id]}, indent=None)
        else:
            print(f"submitted {job.job_id}")
        return
    _wait([job.job_id], show=not json_out)
    try:
        result = job.result()
    except Exception as exc:
        raise PctkError(f"job {job.job_id} failed: {str(exc).strip().splitlines()[-1]}",
                        f"pctk logs {job.job_id}") from None
    if json_out:
        emit_json({"job_id": job.job_id, "result": repr(result)}, indent=None, sort_keys=False)
    else:
        print(result)


def jobs(
    all_users: bool = typer.Option(False, "--all-users", help="Everyone's jobs, not just yours."),
    since: str = typer.Option("now-1days", "--since", help="sacct start time (e.g. now-7days)."),
    json_out: bool = JsonOption,
) -> None:
    """Your jobs: id, name, state, nodes, elapsed, exit code, why pending (sacct + squeue)."""
    use_running_twin()
    user = None if all_users else os.environ.get("USER") or _whoami()
    r = slurm.sacct_rows(SACCT_FIELDS, since=since, user=user)
    rows: list[dict[str, str]] = []
    if r.returncode == 0:
        rows = [{f: row[f] for f in JOB_FIELDS} for row in _parse_rows(r.stdout, SACCT_FIELDS)]
    else:
        r = slurm.squeue_rows(LIVE_FORMAT, user=user, all_states=True)
        if r.returncode != 0:
            raise PctkError(f"neither sacct nor squeue answered: {slurm.error_line(r)}",
                            _no_slurm_hint())
        rows = [_live_row(row) for row in _parse_rows(r.stdout, LIVE_FIELDS)]
    source = str(r.args[0])  # the command that answered: sacct, else squeue
    if source == slurm.SACCT:
        _merge_live(rows, user)
    if json_out:
        emit_json({"source": source, "jobs": rows}, sort_keys=False)
        return
    t = Table("id", "name", "state", "nodes", "elapsed", "exit", "node list",
              title=f"jobs (from {source})")
    t.add_column("reason", overflow="fold")  # PartitionConfig in full, even when narrow
    colors = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow"}
    for row in rows:
        st = row.get("State", "")
        c = colors.get(st.split()[0] if st else "", "red")
        t.add_row(row["JobID"], row.get("JobName", "").replace("\n", "\\n"), f"[{c}]{st}[/]",
                  row.get("NNodes", ""), row.get("Elapsed", ""), row.get("ExitCode", ""),
                  row.get("NodeList", ""), row.get("Reason", ""))
    cli_console().print(t)


def _no_slurm_hint() -> str:
    if not os.environ.get("SLURM_CONF") and not SYSTEM_SLURM_CONF.exists():
        return "no Slurm here and no twin running: start one with `pctk local up`"
    return "is slurmctld running? (`pctk local status` for the twin)"


def _merge_live(rows: list[dict[str, str]], user: str | None) -> None:
    """Why pending jobs wait (sacct does not know; squeue does: PartitionConfig, Resources...),
    and the jobs slurmdbd has not recorded yet (a second or two after sbatch)."""
    sq = slurm.squeue_rows(LIVE_FORMAT, user=user)
    live = {row["JobID"]: _live_row(row)
            for row in (_parse_rows(sq.stdout, LIVE_FIELDS) if sq.returncode == 0 else [])}
    for row in rows:
        now = live.pop(row["JobID"], None)
        pending = row.get("State", "").startswith("PENDING")
        row["Reason"] = now["Reason"] if now and pending else ""
    rows.extend(live.values())


def _live_row(row: dict[str, str]) -> dict[str, str]:
    """A squeue row in sacct's shape; the reason only for a job that waits."""
    return {**{f: row.get(f, "") for f in JOB_FIELDS},
            "Reason": row["Reason"] if row["State"] == "PENDING" else ""}


_RECORD = re.compile(r"^\d+(?:_\S+)?\|")  # a job id, an array task's too (12_3, 12_[4-9])


def _parse_rows(text: str, fields: list[str]) -> list[dict[str, str]]:
    """``|``-separated rows whose last field is the job name: split off the other fields,
    the rest is the name ("|" in it kept); a line that starts no new job (no id and fewer
    separators) continues the name above it (a name holding a newline)."""
    rows: list[dict[str, str]] = []
    for line in text.rstrip("\n").split("\n") if text.strip() else []:
        if not rows or (_RECORD.match(line) and line.count("|") >= len(fields) - 1):
            rows.append(dict(zip(fields, line.split("|", len(fields) - 1), strict=False)))
        else:
            rows[-1][fields[-1]] = rows[-1].get(fields[-1], "") + "\n" + line
    return rows


def _whoami() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


class NoLogs(PctkError):
    """Nothing to show: exit 1 (a state, like grep's no match), not 2 (bad input)."""

    exit_code = 1


def _log_paths(job_id: str, task: int | None) -> list[Path]:
    meta = load_index(job_id)
    if meta:
        folder = Path(meta["folder"])
        if meta.get("kind") == "submitit":
            folder = submitit_folder(meta["folder"], job_id)
        return find_logs(folder, job_id, task)
    stdout = slurm.job_stdout(job_id)
    if stdout is None:
        return []
    out = Path(stdout)
    return find_logs(out.parent, job_id, task) or ([out] if out.exists() else [])


def logs(
    job_id: str = typer.Argument(..., help="Job id, array id (every element) or array "
                                 "element id (123_4)."),
    task: int = typer.Option(None, "--task", help="Task (rank) number (default: the batch log "
                             "and every rank)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
) -> None:
    """Print a job's output, each file under a ==> name <== header; --task for one rank."""
    if not job_id.replace("_", "").isdigit():
        raise PctkError(f"{job_id!r} is not a job id", "use a number like 1234 or 1234_5")
    use_running_twin()
    paths = _log_paths(job_id, task)
    if not paths and not follow:
        which = f"task {task} of job {job_id}" if task is not None else f"job {job_id}"
        raise NoLogs(f"no logs found for {which}",
                     "logs exist once the job has started; pctk jobs shows its state")
    offsets: dict[Path, int] = {}
    shown: list[Path] = []  # the file last printed, for headers between files
    while True:
        # decide "ended" before reading, so the last lines written are always printed
        ended = not follow or not slurm.job_is_queued(job_id)
        current = _log_paths(job_id, task)
        for p in current:
            try:
                chunk = _read_from(p, offsets)
            except NotRegularFile as exc:
                raise PctkError(f"{exc}, so it is not shown", "a job's log is a regular "
                                f"file: see what replaced it (ls -l {shlex.quote(str(p))})"
                                ) from None
            except OSError:
                continue
            if chunk:
                if len(current) > 1 and shown[-1:] != [p]:
                    print(f"==> {p.name} <==", flush=True)
                shown.append(p)
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
        if ended:
            if current and not shown:
                print(f"job {job_id}: {len(current)} log file(s) in {current[0].parent}, all "
                      "empty", file=sys.stderr)
            return
        try:
            time.sleep(1)
        except KeyboardInterrupt:
            return


def _read_from(path: Path, offsets: dict[Path, int]) -> bytes:
    """What ``path`` holds past the offset read last time. A regular file only: a FIFO
    would block forever and a symbolic link could show any file (/etc/shadow), so both
    are refused (NotRegularFile) before a byte is read."""
    with os.fdopen(open_regular_fd(path, follow_symlinks=False), "rb") as fh:
        fh.seek(offsets.get(path, 0))
        chunk = fh.read()
        offsets[path] = fh.tell()
    return chunk


def cancel(
    job_ids: list[str] = typer.Argument(..., help="Job ids to cancel."),
    json_out: bool = JsonOption,
) -> None:
    """Cancel jobs (scancel)."""
    bad = [j for j in job_ids if not j.replace("_", "").isdigit()]
    if bad:
        raise PctkError(f"not job ids: {', '.join(map(repr, bad))}", "use numbers like 1234")
    use_running_twin()
    slurm.cancel(*job_ids, check=True)
    if json_out:
        emit_json({"cancelled": job_ids}, indent=None)
    else:
        print(f"cancelled {' '.join(job_ids)}")


def register(app: typer.Typer) -> None:
    ctx = {"allow_extra_args": False}
    app.command("submit", context_settings=ctx)(submit)
    app.command("jobs")(jobs)
    app.command("logs")(logs)
    app.command("cancel")(cancel)
