"""One health sweep: classify nodes, run the checks in one job per partition, judge, act.

Nodes Slurm cannot run a job on (down, not responding, powered down) are not put in the
job: they are reported on the ``node`` check with Slurm's reason, so one dead node cannot
hang the sweep. Nodes drained by someone else are left alone. With ``resume_healthy``,
nodes pctk drained earlier are resumed into a maintenance reservation (so no one else's
job lands there), checked, and either left in service or drained again.

Only a node's own evidence drains it: a failed check in its report, or Slurm saying it is
down. A node that wrote no report (the job failed before the checks ran: a wrong
interpreter path, a folder the nodes cannot write; or it still ran at the timeout) is
UNKNOWN, never drained for that. A storage check that fails on every node at once points at
the storage, so no node is drained for it. And a sweep that would drain more than
``max_drain`` nodes drains none: a fault that wide is more likely on the driver's side,
in the network or in shared storage than in that many nodes.
"""

from __future__ import annotations

import json
import math
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.health.runner import CHECK_NAMES, LEVELS, drain_reason
from benchmarks.health.status import FAIL, OK, SKIP, WARN, CheckResult
from toolkit import slurm
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_json
from toolkit.health.expect import build_expectations
from toolkit.health.inventory import (
    HealthInputError,
    SlurmNode,
    not_swept,
    read_nodes,
    select_nodes,
)
from toolkit.paths import code_root, health_dir, sbatch_script
from toolkit.submit.jobspec import JobSpec, sbatch_options

REPO_ROOT = code_root()
SWEEP_SCRIPT = sbatch_script("health-sweep.sbatch")
UNKNOWN = "UNKNOWN"  # the node check of a node that wrote no report: no evidence either way
MAX_DRAIN_FRACTION = 0.10  # default --max-drain: this share of the partition, at least 1
DEFAULT_TIMEOUT_S = {"quick": 300.0, "full": 3600.0}


@dataclass
class SweepOptions:
    nodes: str | None = None
    partition: str | None = None
    level: str = "quick"
    drain: bool = False
    resume_healthy: bool = False
    mounts: list[str] | None = None  # None: the node side's default (/fsx, /home)
    tool_path: list[str] = field(default_factory=list)
    checks: list[str] | None = None
    dcgm_level: int = 1
    thresholds: dict[str, Any] | None = None
    workdir: Path | None = None  # must be shared with the nodes (home or /fsx on a cluster)
    run_dir: Path | None = None  # this run's own folder (new or empty); default workdir/run_id
    timeout_s: float | None = None
    python: str = sys.executable
    max_drain: int | None = None  # None: max(1, 10% of the swept partitions' nodes)
    progress: Callable[[str], None] = lambda _msg: None


@dataclass
class Group:
    """Nodes checked by one job: same partition and GPU count, maybe in a reservation."""

    partition: str
    gpus: int
    nodes: list[str]
    reservation: str | None = None
    job_id: str | None = None


@dataclass
class SweepResult:
    run_id: str
    run_dir: Path
    level: str
    partition: str | None
    nodes: dict[str, dict[str, dict[str, Any]]]  # node -> check -> result
    instance_types: dict[str, str | None]
    job_ids: list[str]
    drained: dict[str, str] = field(default_factory=dict)
    resumed: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # sweep-wide findings, said once
    max_drain: int | None = None
    elapsed_s: float = 0.0

    def statuses(self) -> list[str]:
        return [c["status"] for checks in self.nodes.values() for c in checks.values()]

    @property
    def verdict(self) -> str:
        st = self.statuses()
        if FAIL in st:
            return "FAIL"
        if WARN in st:
            return "WARN"
        if self.unchecked or OK not in st:
            return "UNKNOWN"
        return "PASS"

    @property
    def exit_code(self) -> int:
        """Nagios: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."""
        return {"PASS": 0, "WARN": 1, "FAIL": 2}.get(self.verdict, 3)


def node_state_check(node: SlurmNode, rechecked: bool = False) -> CheckResult:
    """The ``node`` check: Slurm's state and reason, judged before any job runs."""
    value = {"state": node.state, "reason": node.reason or None}
    if skipped := not_swept(node):
        return CheckResult(SKIP, value, "powered up", skipped)
    if not node.responsive:
        why = f"{node.state}" + (f" ({node.reason})" if node.reason else "")
        return CheckResult(FAIL, value, "responding", why, "check slurmd on the node "
                           "(systemctl status slurmd, /var/log/slurmd.log); reboot or replace")
    if rechecked:
        return CheckResult(OK, value, "in service",
                           f"was drained by pctk ({node.reason}); re-checked")
    if node.drained:
        by = "pctk" if node.drained_by_pctk else "an operator"
        hint = "re-check with --resume-healthy" if node.drained_by_pctk else \
            "resume it with scontrol when fixed"
        return CheckResult(WARN, value, "in service",
                           f"drained by {by} ({node.reason}); not checked", hint)
    return CheckResult(OK, value, "in service", node.state)


def _groups(nodes: list[SlurmNode], partition: str | None, reservation: str | None
            ) -> list[Group]:
    groups: dict[tuple[str, int], Group] = {}
    for n in nodes:
        part = partition or n.partitions[0]
        key = (part, n.gpu_count)
        groups.setdefault(key, Group(part, n.gpu_count, [], reservation)).nodes.append(n.name)
    return list(groups.values())


def _sbatch_argv(g: Group, opts: SweepOptions, run_dir: Path, minutes: int) -> list[str]:
    spec = JobSpec(
        job_name="pctk-health", nodes=len(g.nodes), ntasks_per_node=1,
        gres=f"gpu:{g.gpus}" if g.gpus else None,  # --exclusive alone does not hand out GRES
        exclusive=True, partition=g.partition, nodelist=",".join(g.nodes),
        reservation=g.reservation, time=minutes, requeue=False,
        output=f"{run_dir}/job-%j.out", chdir=str(run_dir),
        export=f"ALL,PYTHONPATH={REPO_ROOT},PCTK_PYTHON={opts.python}")
    argv = [*sbatch_options(spec), str(SWEEP_SCRIPT), "--level", opts.level,
            "--expect", str(run_dir / "expect.json"), "--out-dir", str(run_dir / "nodes"),
            "--dcgm-level", str(opts.dcgm_level)]
    if opts.checks:
        argv += ["--checks", ",".join(opts.checks)]
    return argv


def _wait(groups: list[Group], results: Path, timeout: float,
          progress: Callable[[str], None], settle: bool) -> dict[str, tuple[str, str]]:
    """Until every node wrote its report, every job ended, or the time is up; returns the
    last (state, reason) of each job. With ``settle``, also until the jobs have left the
    nodes (before drains and resumes); else the finished jobs end on their own."""
    expected = {n for g in groups for n in g.nodes}
    ids = [g.job_id for g in groups if g.job_id]
    reasons: dict[str, tuple[str, str]] = {}

    def read(job_ids: list[str]) -> dict[str, str | None]:
        reasons.update({j: slurm.job_reason(j) for j in job_ids})
        return {j: reasons[j][0] for j in job_ids}

    def reported() -> set[str]:
        return {p.stem for p in results.glob("*.json")} & expected

    deadline = time.monotonic() + timeout
    _, timed_out = slurm.wait_jobs(
        ids, read=read, timeout=timeout, poll=1.0, tick=0.05,
        until=lambda: reported() == expected,
        on_poll=lambda _s: progress(f"{len(reported())}/{len(expected)} nodes reported"
                                    + _pending_text(reasons)))
    if not timed_out and reported() != expected:
        time.sleep(0.2)  # every job ended: a report written just before the job ended
    if settle:
        slurm.wait_jobs(ids, read=read, poll=0.2,
                        timeout=max(0.0, min(10.0, deadline - time.monotonic())))
    return reasons


def _pending_text(reasons: dict[str, tuple[str, str]]) -> str:
    """``; job 5 PENDING (Resources)`` for the jobs Slurm has not started yet."""
    waiting = [f"job {j} {st} ({why or 'no reason given'})"
               for j, (st, why) in sorted(reasons.items()) if st == "PENDING"]
    return "; " + ", ".join(waiting) if waiting else ""


def _note_never_started(result: SweepResult, groups: list[Group],
                        states: dict[str, tuple[str, str]], timeout: float) -> None:
    """A job still pending at the timeout: Slurm's reason and what holds its nodes."""
    for g in groups:
        state, why = states.get(g.job_id or "", ("", ""))
        if state != "PENDING":
            continue
        held = slurm.node_allocations(g.nodes)
        nodes = ", ".join(
            f"{n} {held[n][0].lower()}" + (f" with {held[n][1]} allocated" if held[n][1]
                                           else "")
            for n in g.nodes if n in held)
        result.notes.append(
            f"job {g.job_id} waited the whole {timeout:g} s and never started: Slurm kept it "
            f"PENDING ({why or 'no reason given'})" + (f"; its nodes: {nodes}" if nodes else ""))


def _read_report(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("checks"), dict) else None


def default_max_drain(partition_size: int) -> int:
    """The --max-drain default: 10% of the partition (rounded down), at least 1."""
    return max(1, math.floor(partition_size * MAX_DRAIN_FRACTION))


def _partition_size(nodes: dict[str, SlurmNode], selected: list[SlurmNode],
                    partition: str | None) -> int:
    parts = {partition} if partition else {p for n in selected for p in n.partitions}
    return sum(1 for n in nodes.values() if parts & set(n.partitions))


def _missing_report(g: Group, states: dict[str, tuple[str, str]], timeout: float,
                    run_dir: Path, now: SlurmNode | None) -> CheckResult:
    """The ``node`` check of a node that wrote no report.

    Only Slurm saying the node is down now is evidence against it; a job that failed or
    still ran is not (the cause is as often on the driver's side or in shared storage).
    """
    if now is not None and not now.responsive:
        return node_state_check(now)
    state, reason = states.get(g.job_id or "", ("UNKNOWN", ""))
    value = {"job": g.job_id, "job_state": state}
    if state == "PENDING":
        return CheckResult(SKIP, value, "report",
                           f"not checked: job {g.job_id} did not run within {timeout:g}s "
                           f"({reason or state}); nodes busy?")
    log = run_dir / f"job-{g.job_id}.out"
    if slurm.is_active(state):
        return CheckResult(UNKNOWN, value, "report",
                           f"no report: job {g.job_id} still {state} at the {timeout:g}s "
                           "timeout; not evidence against the node",
                           f"raise --timeout; see {log}")
    return CheckResult(UNKNOWN, value, "report",
                       f"no report: job {g.job_id} {state} before the node wrote one; not "
                       "evidence against the node",
                       f"see {log}: the interpreter path (--python), a --workdir the nodes "
                       "can write, shared storage")


def _nodes_now() -> dict[str, SlurmNode]:
    try:
        return read_nodes()
    except PctkError:
        return {}  # no evidence against any node, then


def _storage_wide(nodes: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Nodes whose storage check failed, when it failed on every node that ran it (>= 2)."""
    ran = [n for n, checks in nodes.items()
           if checks.get("storage", {}).get("status") not in (None, SKIP)]
    failed = [n for n in ran if nodes[n]["storage"]["status"] == FAIL]
    return failed if len(ran) >= 2 and failed == ran else []


def run_sweep(opts: SweepOptions) -> SweepResult:
    if opts.level not in LEVELS:
        raise HealthInputError(f"unknown level {opts.level!r}", f"use {' or '.join(LEVELS)}")
    unknown = sorted(set(opts.checks or []) - set(CHECK_NAMES))
    if unknown:
        raise HealthInputError(f"unknown check {', '.join(unknown)}",
                               f"checks: {', '.join(CHECK_NAMES)}")
    if not SWEEP_SCRIPT.exists():
        raise PctkError(f"{SWEEP_SCRIPT} not found",
                        "the pctk install is incomplete: reinstall it (its wheel carries sbatch/)")
    start = time.monotonic()
    timeout = opts.timeout_s or DEFAULT_TIMEOUT_S[opts.level]
    all_nodes = read_nodes()
    selected = select_nodes(all_nodes, opts.nodes, opts.partition)
    max_drain = opts.max_drain
    if max_drain is None:
        max_drain = default_max_drain(_partition_size(all_nodes, selected, opts.partition))
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    run_dir = opts.run_dir or (opts.workdir or health_dir()) / run_id
    if opts.run_dir is not None and run_dir.is_dir() and any(run_dir.iterdir()):
        raise HealthInputError(f"run folder {run_dir} is not empty",
                               "give a new --run-dir, so old node reports cannot mix in")
    (run_dir / "nodes").mkdir(parents=True, exist_ok=opts.run_dir is not None)

    node_checks: dict[str, CheckResult] = {}
    to_check: list[SlurmNode] = []
    to_recheck: list[SlurmNode] = []
    for n in selected:
        if n.responsive and n.drained_by_pctk and opts.resume_healthy:
            to_recheck.append(n)
            node_checks[n.name] = node_state_check(n, rechecked=True)
            continue
        node_checks[n.name] = node_state_check(n)
        if n.responsive and not n.drained:
            to_check.append(n)

    itypes = {n.name: n.instance_type for n in selected}
    atomic_write_json(run_dir / "expect.json", build_expectations(
        {t for t in itypes.values() if t}, mounts=opts.mounts, thresholds=opts.thresholds,
        tool_path=opts.tool_path,
        nodes={k: v for k, v in itypes.items() if v}))
    minutes = max(2, int(timeout // 60) + 1)
    reservation = f"pctk-health-{run_id}" if to_recheck else None
    groups = _groups(to_check, opts.partition, None)
    groups += _groups(to_recheck, opts.partition, reservation)
    old_reasons = {n.name: n.reason for n in to_recheck}
    states: dict[str, tuple[str, str]] = {}
    resumed_for_check: list[str] = []
    try:
        if reservation:
            slurm.create_reservation(reservation, list(old_reasons), minutes + 5)
            for name in old_reasons:
                slurm.resume(name)
                resumed_for_check.append(name)
        for g in groups:
            g.job_id = slurm.sbatch(_sbatch_argv(g, opts, run_dir, minutes))
            opts.progress(f"job {g.job_id}: {len(g.nodes)} nodes in {g.partition}")
        states = _wait(groups, run_dir / "nodes", timeout, opts.progress,
                       settle=opts.drain or bool(to_recheck))
    except BaseException:
        for g in groups:
            if g.job_id:
                slurm.cancel(g.job_id)
        for name in resumed_for_check:
            slurm.drain(name, old_reasons[name])
        if reservation:
            slurm.delete_reservation(reservation)
        raise
    reported = {p.stem for p in (run_dir / "nodes").glob("*.json")}
    for g in groups:
        if g.job_id and not set(g.nodes) <= reported:
            slurm.cancel(g.job_id)  # timed out: stop what still waits or hangs

    result = SweepResult(run_id, run_dir, opts.level, opts.partition, {}, itypes,
                         [g.job_id for g in groups if g.job_id], max_drain=max_drain)
    checked_in = {name: g for g in groups for name in g.nodes}
    # Slurm's view now, for nodes that wrote no report: a node that went down is evidence
    now = _nodes_now() if set(checked_in) - reported else {}
    for n in selected:
        checks: dict[str, dict[str, Any]] = {}
        node_check = node_checks[n.name]
        group = checked_in.get(n.name)
        if group is not None:
            report = _read_report(run_dir / "nodes" / f"{n.name}.json")
            if report is None:
                node_check = _missing_report(group, states, timeout, run_dir, now.get(n.name))
                if node_check.status != FAIL:
                    result.unchecked.append(n.name)
            else:
                checks = {k: report["checks"][k] for k in CHECK_NAMES if k in report["checks"]}
                result.instance_types[n.name] = report.get("instance_type") or itypes[n.name]
        result.nodes[n.name] = {"node": node_check.to_json(), **checks}
    _note_no_reports(result, groups)
    _note_never_started(result, groups, states, timeout)

    try:
        _act(result, selected, old_reasons, opts.drain)
    finally:
        if reservation:
            slurm.delete_reservation(reservation)
    result.elapsed_s = round(time.monotonic() - start, 2)
    return result


def _note_no_reports(result: SweepResult, groups: list[Group]) -> None:
    for g in groups:
        unknown = [n for n in g.nodes if result.nodes[n]["node"]["status"] == UNKNOWN]
        if len(unknown) == len(g.nodes) > 1:
            result.notes.append(
                f"no node of job {g.job_id} wrote a report: a fault on the driver's side (the "
                "interpreter path, the --workdir, shared storage, --timeout), not in the "
                f"nodes; see {result.run_dir / f'job-{g.job_id}.out'}")


def _drain_reasons(result: SweepResult) -> dict[str, str]:
    """node -> drain reason, from the node's own evidence only."""
    storage_wide = set(_storage_wide(result.nodes))
    if storage_wide:
        result.notes.append(
            f"storage fails on every node checked ({len(storage_wide)}): the shared storage, "
            "not the nodes; no node drained for it")
    reasons = {}
    for node, checks in result.nodes.items():
        own = {k: v for k, v in checks.items() if not (k == "storage" and node in storage_wide)}
        reason = drain_reason(own)
        if reason:
            reasons[node] = reason
    return reasons


def _act(result: SweepResult, selected: list[SlurmNode], old_reasons: dict[str, str],
         drain: bool) -> None:
    """Drain failing nodes (with --drain, up to max_drain); re-drain or keep resumed the
    re-checked ones."""
    reasons = _drain_reasons(result)
    to_drain: dict[str, str] = {}
    for n in selected:
        reason = reasons.get(n.name)
        if n.name in old_reasons:
            if reason or n.name in result.unchecked:
                reason = reason or old_reasons[n.name]
                slurm.drain(n.name, reason)  # back to how it was: not a new drain
                result.drained[n.name] = reason
            else:
                result.resumed.append(n.name)
        elif drain and reason and not n.drained:
            to_drain[n.name] = reason
    cap = len(to_drain) if result.max_drain is None else result.max_drain
    if len(to_drain) > cap:
        result.notes.append(
            f"{len(to_drain)} nodes would be drained, more than --max-drain {cap}: drained "
            "none. A fault this wide is more likely the driver, the network or shared storage "
            "than the nodes; check, then drain by hand or rerun with "
            f"--max-drain {len(to_drain)}")
        return
    for name, reason in to_drain.items():
        slurm.drain(name, reason)
        result.drained[name] = reason
