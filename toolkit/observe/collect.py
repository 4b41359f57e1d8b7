"""Slurm and cost metrics for Prometheus: one sinfo, one squeue and one sacct per scrape.

Families (all gauges; counts are current, hours and dollars cover the jobs that *ended*
inside the window, ``--window``, default 24 h, each job counted whole):

- ``pctk_slurm_nodes{partition,state}``: nodes by state (idle, mixed, allocated, drained,
  draining, down, powered_down, ...); a node in two partitions counts in both.
- ``pctk_slurm_node_drained{node,partition,by,check}``: 1 per drained node; ``by`` is
  ``pctk`` when the reason starts with ``pctk:`` (then ``check`` is the check that drained it,
  from ``pctk: <check>: <message>``), else ``other``.
- ``pctk_slurm_jobs{partition,state}`` and ``pctk_slurm_jobs_pending{partition,reason_class,
  reason}``: jobs slurmctld holds; pending reasons grouped into ``capacity`` (no free nodes
  or GPUs: Resources, ReqNodeNotAvail, ...), ``priority`` (other jobs go first), ``dependency``,
  ``held`` and ``other``. ``pctk_slurm_jobs_pending_oldest_seconds`` is the age of the oldest
  pending job of each class, from its submit time.
- ``pctk_slurm_gpu_hours``, ``pctk_slurm_node_hours`` and ``pctk_slurm_cost_dollars{price=
  "on_demand_list"}`` per user, account and partition (cost also per instance type): from
  ``sacct`` x the catalog's Linux on-demand list price of each node's instance type. A job is
  charged, on every node it held, the larger of its GPU and CPU share of that node; real bills
  differ (reserved capacity, savings plans, idle nodes nobody ran a job on).
- ``pctk_slurm_accounting_available``: 0 where ``sacct`` does not answer (a cluster without
  SlurmSettings/Database): then there are no per-user hours or cost, said once on stderr.
- ``pctk_observe_collect_seconds``, ``pctk_observe_last_success_timestamp_seconds``: how long
  the scrape took and when it last succeeded (alerts use it for staleness).
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from benchmarks.distenv import expand_hostlist
from toolkit import catalog, slurm
from toolkit.errors import PctkError
from toolkit.results.prometheus import Family, registry_of

PCTK_REASON = "pctk:"
DRAIN_FLAGS = {"drain", "drained", "draining"}
DOWN_FLAGS = {"down", "not_responding", "no_respond", "fail"}
POWER_FLAGS = {"powered_down", "powering_down", "power_down", "powering_up"}
# squeue's pending reasons, grouped by what the operator can do about them
CAPACITY_REASONS = {"Resources", "ReqNodeNotAvail", "Nodes_required_for_job_are_DOWN",
                    "NodeDown", "PartitionNodeLimit", "BadConstraints", "Licenses",
                    "Reservation", "ReqNodeNotAvail,_UnavailableNodes", "Cleaning",
                    "Prolog", "Resources,_not_enough_GPU"}
PRIORITY_REASONS = {"Priority", "QOSJobLimit", "QOSResourceLimit", "AssocGrpCpuLimit",
                    "AssocGrpGRES", "AssocMaxJobsLimit", "AssocGrpJobsLimit",
                    "QOSMaxJobsPerUserLimit", "JobArrayTaskLimit"}
HELD_REASONS = {"JobHeldUser", "JobHeldAdmin", "BeginTime"}
DEPENDENCY_REASONS = {"Dependency", "DependencyNeverSatisfied"}
PRICE_LABEL = "on_demand_list"
_told_no_accounting: set[str] = set()  # said once per process (an exporter scrapes often)


@dataclass(frozen=True)
class Node:
    name: str
    partitions: tuple[str, ...]
    state: str  # StateComplete, e.g. "idle+drain"
    reason: str
    instance_type: str | None
    gpus: int
    cpus: int

    @property
    def flags(self) -> set[str]:
        return set(self.state.lower().split("+"))

    @property
    def drained(self) -> bool:
        return bool(self.flags & DRAIN_FLAGS)

    @property
    def summary_state(self) -> str:
        """One state per node: a drain or a fault wins over the base state."""
        flags, base = self.flags, self.state.lower().split("+")[0]
        if flags & DRAIN_FLAGS:
            return "drained" if base in ("idle", "down") else "draining"
        if flags & DOWN_FLAGS:
            return "down"
        if flags & POWER_FLAGS:
            return "powered_down"
        return base or "unknown"

    @property
    def drained_by(self) -> tuple[str, str]:
        """(by, check): ("pctk", "<check>") for a pctk drain, ("other", "") else."""
        if not self.reason.startswith(PCTK_REASON):
            return "other", ""
        check = self.reason[len(PCTK_REASON):].strip().split(":", 1)[0].strip()
        return "pctk", check if re.fullmatch(r"[A-Za-z0-9_.-]+", check) else "unknown"


def parse_nodes(text: str) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 7 or not parts[0]:
            continue
        name, part, state, reason, feats, gres, cpus = parts[:7]
        part = part.rstrip("*")
        if name in nodes:
            old = nodes[name]
            nodes[name] = Node(name, (*old.partitions, part), old.state, old.reason,
                               old.instance_type, old.gpus, old.cpus)
            continue
        features = [f for f in feats.split(",") if f and f != "(null)"]
        gpu = re.search(r"gpu(?::[^:,(]+)?:(\d+)", gres)
        nodes[name] = Node(
            name, (part,), state, "" if reason == "none" else reason,
            next((f for f in features if catalog.find(f) is not None), None),
            int(gpu.group(1)) if gpu else 0, int(cpus) if cpus.isdigit() else 0)
    return nodes


def reason_class(reason: str) -> str:
    if reason in CAPACITY_REASONS or reason.startswith(("ReqNodeNotAvail", "Nodes_required")):
        return "capacity"
    if reason in PRIORITY_REASONS:
        return "priority"
    if reason in DEPENDENCY_REASONS:
        return "dependency"
    if reason in HELD_REASONS:
        return "held"
    return "other"


def _epoch(stamp: str) -> float | None:
    try:
        return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def job_families(text: str, now: float) -> list[Family]:
    jobs = Family("pctk_slurm_jobs", "Jobs slurmctld holds, by partition and state.")
    pending = Family("pctk_slurm_jobs_pending",
                     "Pending jobs by partition and reason, grouped: capacity (no free "
                     "nodes/GPUs), priority (others go first), dependency, held, other.")
    oldest = Family("pctk_slurm_jobs_pending_oldest_seconds",
                    "Age of the oldest pending job (since submission) by partition and "
                    "reason class.")
    by_state: Counter[tuple[str, str]] = Counter()
    by_reason: Counter[tuple[str, str, str]] = Counter()
    ages: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 7 or not parts[0]:
            continue
        _jid, state, partition, reason, _user, _account, submitted = parts[:7]
        # "ReqNodeNotAvail, UnavailableNodes:gpu-st-p5-[3-4]": the code, not the node names
        reason = re.sub(r",?\s*UnavailableNodes:.*$", "", reason.strip()).replace(" ", "_")
        for part in partition.split(","):  # a job submitted to several partitions
            by_state[(part, state)] += 1
            if state != "PENDING":
                continue
            cls = reason_class(reason)
            by_reason[(part, cls, reason)] += 1
            if (t := _epoch(submitted)) is not None:
                ages[(part, cls)] = max(ages.get((part, cls), 0.0), max(0.0, now - t))
    for (part, state), n in by_state.items():
        jobs.add({"partition": part, "state": state}, n)
    for (part, cls, reason), n in by_reason.items():
        pending.add({"partition": part, "reason_class": cls, "reason": reason}, n)
    for (part, cls), age in ages.items():
        oldest.add({"partition": part, "reason_class": cls}, age)
    return [jobs, pending, oldest]


def node_families(nodes: dict[str, Node]) -> list[Family]:
    counts = Family("pctk_slurm_nodes", "Nodes by partition and state (a drain or a fault "
                    "wins over the base state).")
    drained = Family("pctk_slurm_node_drained",
                     "1 per drained node; by=pctk when pctk drained it (check = the check "
                     "that failed), else other.")
    by_state: Counter[tuple[str, str]] = Counter()
    for node in nodes.values():
        for part in node.partitions:
            by_state[(part, node.summary_state)] += 1
            if node.drained:
                by, check = node.drained_by
                drained.add({"node": node.name, "partition": part, "by": by, "check": check}, 1)
    for (part, state), n in by_state.items():
        counts.add({"partition": part, "state": state}, n)
    return [counts, drained]


def _tres(alloc: str, key: str) -> int:
    m = re.search(rf"(?:^|,){re.escape(key)}=(\d+)", alloc)
    return int(m.group(1)) if m else 0


class _Hosts:
    """expand_hostlist with a cache: 10,000 jobs name far fewer distinct node lists."""

    def __init__(self) -> None:
        self.cache: dict[str, list[str]] = {}

    def __call__(self, nodelist: str) -> list[str]:
        if nodelist not in self.cache:
            try:
                self.cache[nodelist] = expand_hostlist(nodelist) if nodelist else []
            except ValueError:
                self.cache[nodelist] = []
        return self.cache[nodelist]


def usage_families(text: str, nodes: dict[str, Node], window: str) -> list[Family]:
    gpu_hours = Family("pctk_slurm_gpu_hours",
                       "GPU hours of the jobs that ended in the window, by user, account and "
                       "partition.")
    node_hours = Family("pctk_slurm_node_hours",
                        "Node hours of the jobs that ended in the window.")
    cost = Family("pctk_slurm_cost_dollars",
                  "Cost of the jobs that ended in the window at the catalog's Linux on-demand "
                  "LIST price (price=on_demand_list): per node, the larger of the job's GPU "
                  "and CPU share times the instance's hourly price.")
    ended = Family("pctk_slurm_jobs_ended", "Jobs that ended in the window, by final state.")
    gh: defaultdict[tuple[str, str, str], float] = defaultdict(float)
    nh: defaultdict[tuple[str, str, str], float] = defaultdict(float)
    usd: defaultdict[tuple[str, str, str, str], float] = defaultdict(float)
    states: Counter[tuple[str, str]] = Counter()
    hosts = _Hosts()
    prices = {it.name: it.price_usd_per_hour for it in catalog.all_instances()}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 9 or not parts[0]:
            continue
        _jid, user, account, partition, elapsed, alloc, state, nnodes, nodelist = parts[:9]
        states[(partition, state.split()[0] if state else "UNKNOWN")] += 1
        hours = int(elapsed) / 3600 if elapsed.isdigit() else 0.0
        n_nodes = int(nnodes) if nnodes.isdigit() else 0
        if n_nodes <= 0:  # never ran (cancelled while pending): no hours, no cost
            continue
        key = (user, account, partition)
        gpus, cpus = _tres(alloc, "gres/gpu"), _tres(alloc, "cpu")
        gh[key] += gpus * hours
        nh[key] += n_nodes * hours
        for name in hosts(nodelist):
            node = nodes.get(name)
            price = prices.get(node.instance_type) if node and node.instance_type else None
            if node is None or price is None:
                continue
            share = max(gpus / n_nodes / node.gpus if node.gpus else 0.0,
                        cpus / n_nodes / node.cpus if node.cpus else 1.0)
            usd[(*key, node.instance_type or "")] += min(share, 1.0) * price * hours
    for (user, account, partition), value in gh.items():
        labels = {"user": user, "account": account, "partition": partition, "window": window}
        gpu_hours.add(labels, value)
        node_hours.add(labels, nh[(user, account, partition)])
    for (user, account, partition, itype), value in usd.items():
        cost.add({"user": user, "account": account, "partition": partition,
                  "instance_type": itype, "price": PRICE_LABEL, "window": window}, value)
    for (partition, state), n in states.items():
        ended.add({"partition": partition, "state": state, "window": window}, n)
    return [gpu_hours, node_hours, cost, ended]


def _say_once(what: str) -> None:
    if what not in _told_no_accounting:
        _told_no_accounting.add(what)
        print(f"pctk observe: {what}", file=sys.stderr)


def collect_families(window_hours: float = 24.0, cluster: str | None = None) -> list[Family]:
    """Read Slurm once and return every family (raises PctkError when slurmctld is down)."""
    t0 = time.monotonic()
    now = time.time()
    nodes = parse_nodes(slurm.sinfo_node_rows())
    families = node_families(nodes) + job_families(slurm.squeue_job_rows(), now)
    window = f"{window_hours:g}h"
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now - window_hours * 3600))
    r = slurm.sacct_ended_jobs(start)
    accounting = Family("pctk_slurm_accounting_available",
                        "1 when sacct answers (per-user hours and cost are exported), else 0.")
    if r.returncode == 0:
        families += usage_families(r.stdout, nodes, window)
        accounting.add({}, 1)
    else:
        detail = (r.stderr or r.stdout).strip().splitlines()
        _say_once("no accounting on this cluster (sacct: "
                  f"{detail[-1] if detail else f'exit {r.returncode}'}): node and job counts "
                  "only, no per-user GPU hours or cost")
        accounting.add({}, 0)
    took = Family("pctk_observe_collect_seconds", "Time the last Slurm scrape took.")
    took.add({}, time.monotonic() - t0)
    ok = Family("pctk_observe_last_success_timestamp_seconds",
                "When Slurm was last read successfully (Unix time).")
    ok.add({}, now)
    families += [accounting, took, ok]
    if cluster:
        for fam in families:
            fam.samples = [({**labels, "cluster": cluster}, v) for labels, v in fam.samples]
    return families


class SlurmCollector(Collector):
    """A prometheus_client collector that reads Slurm on every scrape (the HTTP exporter)."""

    def __init__(self, window_hours: float = 24.0, cluster: str | None = None) -> None:
        self.window_hours = window_hours
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        up = Family("pctk_slurm_up", "1 when slurmctld answered this scrape, else 0.")
        labels = {"cluster": self.cluster} if self.cluster else {}
        try:
            families = collect_families(self.window_hours, self.cluster)
        except PctkError as exc:
            # slurmctld down: say so in the scrape (the last-success gauge goes stale)
            print(f"pctk observe: {exc.one_line()}", file=sys.stderr, flush=True)
            up.add(labels, 0)
            families = [up]
        else:
            up.add(labels, 1)
            families.append(up)
        yield from registry_of(families).collect()


def registry(window_hours: float = 24.0, cluster: str | None = None) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(SlurmCollector(window_hours, cluster))
    return reg


def sample_count(families: Iterable[Family]) -> int:
    return sum(len(f.samples) for f in families)
