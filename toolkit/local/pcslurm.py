"""ParallelCluster's own slurm.conf settings, and the few the twin must change.

ParallelCluster writes ``slurm.conf`` (fixed settings) and ``slurm_parallelcluster.conf``
(from the cluster config: SuspendTime, ResumeTimeout, SelectTypeParameters, SuspendExcNodes,
partitions) on the head node; source: aws-parallelcluster-cookbook,
``cookbooks/aws-parallelcluster-slurm/templates/default/slurm/slurm.conf.erb`` and
``files/default/head_node_slurm/slurm/templates/slurm_parallelcluster.conf``. The twin renders
the same settings, then applies :data:`DEVIATIONS`: what one machine holding many nodes, or a
test suite that must not wait for half-hour timers, forces. Each deviation says why;
``tests/test_twin_render.py`` holds the rendered file against this list.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.config.findings import format_path
from toolkit.config.model import (
    DEFAULT_BOOTSTRAP_TIMEOUT,
    DEFAULT_DYNAMIC_NODE_PRIORITY,
    DEFAULT_MEMORY_BASED_SCHEDULING,
    DEFAULT_QUEUE_UPDATE_STRATEGY,
    DEFAULT_SCALEDOWN_IDLETIME,
    DEFAULT_STATIC_NODE_PRIORITY,
    ClusterTopology,
)

# Twin seconds = ParallelCluster seconds / TIME_FACTOR for the clocks of a cluster's life
# (idle power-down, boot, suspend, node-death detection, kill grace, credential lifetime).
# Per-message bounds (MessageTimeout) and record retention (MinJobAge) are kept: they never
# make anyone wait, and shortening them only fails RPCs on a loaded host.
TIME_FACTOR = 6
# Slurm's default batch_sched_delay (SchedulerParameters; ParallelCluster leaves it unset): how
# long the scheduling of a submitted batch job may be put off, to gather a burst of submissions
BATCH_SCHED_DELAY = 3
# the twin's: divided by TIME_FACTOR, rounded down to the whole seconds Slurm takes (0: schedule
# at once; 1 s would be 6 s on the cluster's clock)
TWIN_BATCH_SCHED_DELAY = BATCH_SCHED_DELAY // TIME_FACTOR

# slurm.conf.erb, in its order (values that do not depend on the cluster config)
PARALLELCLUSTER_FIXED: tuple[tuple[str, str], ...] = (
    ("SwitchType", "switch/none"),
    ("ReconfigFlags", "KeepPartState"),
    ("SlurmctldParameters", "idle_on_node_suspend,power_save_min_interval=30"),
    ("TreeWidth", "65533"),
    ("CommunicationParameters", "NoAddrCache"),
    ("SuspendTimeout", "120"),
    ("PrivateData", "cloud"),
    ("ResumeRate", "0"),
    ("SuspendRate", "0"),
    ("PrologFlags", "alloc,serial"),
    ("SchedulerParameters", "nohold_on_prolog_fail"),
    ("SlurmctldTimeout", "300"),
    ("SlurmdTimeout", "180"),
    ("UnkillableStepTimeout", "180"),
    ("InactiveLimit", "0"),
    ("MinJobAge", "300"),
    ("KillWait", "30"),
    ("Waittime", "0"),
    ("MessageTimeout", "60"),
    ("AuthInfo", "cred_expire=70"),
    ("EnforcePartLimits", "ALL"),
    ("SchedulerType", "sched/backfill"),
    ("ProctrackType", "proctrack/cgroup"),
    ("MpiDefault", "none"),
    ("ReturnToService", "1"),
    ("TaskPlugin", "task/affinity,task/cgroup"),
    ("GresTypes", "gpu"),
    ("SelectType", "select/cons_tres"),
    ("SlurmctldDebug", "info"),
    ("SlurmdDebug", "info"),
    ("JobCompType", "jobcomp/none"),
    ("JobAcctGatherType", "jobacct_gather/cgroup"),
)

# timers divided by TIME_FACTOR (SuspendTime and ResumeTimeout come from the config)
SCALED = frozenset({"SuspendTimeout", "SlurmctldTimeout", "SlurmdTimeout",
                    "UnkillableStepTimeout", "KillWait"})


@dataclass(frozen=True)
class Deviation:
    keys: tuple[str, ...]  # slurm.conf parameters (or node/partition attributes) it changes
    parallelcluster: str
    twin: str
    reason: str


# What the twin changes, and why. docs/twin.md ("What the twin changes in ParallelCluster's
# slurm.conf") shows the same list; tests/test_twin_render.py checks the rendered file:
# every ParallelCluster setting not named here is rendered unchanged.
DEVIATIONS: tuple[Deviation, ...] = (
    Deviation(("SlurmctldPort", "SlurmdPort"), "6820-6829, 6818",
              "one free port for slurmctld, a Port= per node",
              "many slurmd share one host; other twins or a system Slurm may hold the defaults"),
    Deviation(("StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile",
               "SlurmctldLogFile", "SlurmdLogFile"), "/var/spool, /var/run, /var/log",
              "under the twin's state folder, %n per node",
              "one folder per twin; one spool, pid file and log per node on the same host"),
    Deviation(("AuthInfo",), "cred_expire=70",
              f"socket=<twin munge>,cred_expire={round(70 / TIME_FACTOR)}",
              "the twin runs its own munged; cred_expire is a timer (also how long a requeued "
              "job waits to restart)"),
    Deviation(("ProctrackType", "TaskPlugin", "JobAcctGatherType"),
              "proctrack/cgroup, task/affinity,task/cgroup, jobacct_gather/cgroup",
              "proctrack/linuxproc, task/none, jobacct_gather/linux",
              "every slurmd shares one host: no cgroup hierarchy per node (this host has cgroup "
              "v1 with the cpu controller only)"),
    Deviation(("SlurmdParameters",), "(unset)", "config_overrides",
              "nodes declare the instance's GPUs and scaled CPUs, not what this host has"),
    Deviation(("SlurmctldTimeout", "SlurmdTimeout", "UnkillableStepTimeout", "KillWait",
               "SuspendTimeout", "SlurmctldParameters", "SuspendTime", "ResumeTimeout",
               "SchedulerParameters"),
              "300, 180, 180, 30, 120, power_save_min_interval=30, ScaledownIdletime x 60, "
              f"ComputeNodeBootstrapTimeout, batch_sched_delay={BATCH_SCHED_DELAY} (Slurm's "
              "default)", f"divided by TIME_FACTOR={TIME_FACTOR} (batch_sched_delay: "
              f"{TWIN_BATCH_SCHED_DELAY}, whole seconds)",
              "the cluster's clocks run faster so tests see power-down, node failure and kill "
              "in seconds, and a batch job starts as soon as it is submitted; MessageTimeout "
              "(one RPC's bound) and MinJobAge are kept"),
    Deviation(("SuspendProgram", "ResumeProgram", "ResumeFailProgram"),
              "ParallelCluster's slurm_suspend / slurm_resume (EC2 launches)",
              "the twin's scripts in <state>/bin: start or stop the node's slurmd",
              "an instance launch is a slurmd start after a boot delay on this host"),
    Deviation(("CommunicationParameters",), "NoAddrCache",
              "NoAddrCache,NoInAddrAny,NoCtldInAddrAny when the host name resolves to 127.0.0.1",
              "the daemons then listen on loopback alone, not on every interface"),
    Deviation(("CPUs", "RealMemory"), "the instance's vCPUs and memory",
              "scaled down to this host (at least one CPU per GPU)",
              "every node shares this machine's cores and memory"),
    Deviation(("NodeAddr", "NodeHostname", "TaskProlog"),
              "the instance's private IP and ip-10-x-y-z name; no TaskProlog",
              "127.0.x.y and ip-127-0-x-y per node (root only), a TaskProlog that makes tasks "
              "speak from that address",
              "every node is on one host: its own loopback address lets traffic to one node be "
              "told apart and shaped (`pctk local fault slow-net`)"),
)


def deviating_keys(loopback_only: bool = True) -> frozenset[str]:
    keys = {k for d in DEVIATIONS for k in d.keys}
    if not loopback_only:
        keys.discard("CommunicationParameters")
    return frozenset(keys)


@dataclass(frozen=True)
class SlurmSettings:
    """Scheduling/SlurmSettings (and the bootstrap timeout) that shape slurm.conf."""

    scaledown_idletime: int = DEFAULT_SCALEDOWN_IDLETIME  # minutes; -1: never power down
    enable_memory_based_scheduling: bool = DEFAULT_MEMORY_BASED_SCHEDULING
    queue_update_strategy: str = DEFAULT_QUEUE_UPDATE_STRATEGY
    # DevSettings/Timeouts/ComputeNodeBootstrapTimeout, seconds
    bootstrap_timeout: int = DEFAULT_BOOTSTRAP_TIMEOUT

    @property
    def suspend_time(self) -> int:
        """SuspendTime on the twin: ScaledownIdletime x 60 / TIME_FACTOR (-1 stays -1)."""
        if self.scaledown_idletime == -1:
            return -1
        return max(1, self.scaledown_idletime * 60 // TIME_FACTOR)

    @property
    def resume_timeout(self) -> int:
        return max(10, self.bootstrap_timeout // TIME_FACTOR)


def slurm_settings(topo: ClusterTopology) -> SlurmSettings:
    """The config's settings (read, with their defaults, by :mod:`toolkit.config.model`)."""
    return SlurmSettings(
        scaledown_idletime=topo.scaledown_idletime,
        enable_memory_based_scheduling=topo.enable_memory_based_scheduling,
        queue_update_strategy=topo.queue_update_strategy,
        bootstrap_timeout=topo.bootstrap_timeout,
    )


def scaled(seconds: int) -> int:
    return max(1, round(seconds / TIME_FACTOR))


# ---------------------------------------------------------------- queues and compute resources
# What ParallelCluster renders from each queue and compute-resource setting into the
# partition and node lines of slurm_parallelcluster_<queue>_partition.conf; source:
# aws-parallelcluster-cookbook, files/default/head_node_slurm/slurm/config_renderer.py
# (QueueRenderer._render_partition, ComputeResourceRenderer._definitions/_features).
# tests/test_twin_render.py renders each one and compares it with ParallelCluster's line.
PARTITION_FIXED: tuple[tuple[str, str], ...] = (("MaxTime", "INFINITE"), ("State", "UP"))
STATIC_NODE_PRIORITY = DEFAULT_STATIC_NODE_PRIORITY  # Weight= of static nodes
DYNAMIC_NODE_PRIORITY = DEFAULT_DYNAMIC_NODE_PRIORITY  # Weight= of dynamic nodes


@dataclass(frozen=True)
class QueueSetting:
    path: str  # where in the config
    parallelcluster: str  # what ParallelCluster renders for it


QUEUE_SETTINGS: tuple[QueueSetting, ...] = (
    QueueSetting("SlurmQueues[0]", "Default=YES on the first queue's partition only"),
    QueueSetting("SlurmQueues[].JobExclusiveAllocation",
                 "OverSubscribe=EXCLUSIVE on the partition when true (nothing when false)"),
    QueueSetting("SlurmQueues[].CustomSlurmSettings",
                 "each Key: Value appended to the PartitionName line"),
    QueueSetting("ComputeResources[].MinCount/MaxCount",
                 "<q>-st-<cr>-[1-MinCount] and <q>-dy-<cr>-[1-(MaxCount-MinCount)]"),
    QueueSetting("ComputeResources[].StaticNodePriority",
                 f"Weight= of the static nodes (default {STATIC_NODE_PRIORITY})"),
    QueueSetting("ComputeResources[].DynamicNodePriority",
                 f"Weight= of the dynamic nodes (default {DYNAMIC_NODE_PRIORITY})"),
    QueueSetting("ComputeResources[].CustomSlurmSettings",
                 "each Key: Value appended to the compute resource's NodeName lines"),
    QueueSetting("ComputeResources[].Efa.Enabled", "Feature ...,efa"),
    QueueSetting("ComputeResources[].Instances",
                 "Feature static|dynamic,<instance type>,<cr>: no instance type when several"),
    QueueSetting("ComputeResources[].DisableSimultaneousMultithreading",
                 "CPUs= the vCPUs divided by the threads per core"),
)

# partition and node attributes the twin sets itself; a queue's or compute resource's
# CustomSlurmSettings for them are not applied (a note says so)
TWIN_PARTITION_KEYS = frozenset(k.lower() for k in ("PartitionName", "Nodes"))
TWIN_NODE_KEYS = frozenset(k.lower() for k in (
    "NodeName", "NodeHostname", "NodeAddr", "Port", "CPUs", "RealMemory", "Gres", "Feature",
    "Features", "State"))


@dataclass(frozen=True)
class ResourceSettings:
    """What a compute resource adds to its NodeName lines."""

    static_weight: int = STATIC_NODE_PRIORITY
    dynamic_weight: int = DYNAMIC_NODE_PRIORITY
    custom: tuple[tuple[str, str], ...] = ()
    several_instance_types: bool = False


@dataclass(frozen=True)
class QueueSettings:
    exclusive: bool = False
    custom: tuple[tuple[str, str], ...] = ()
    resources: dict[str, ResourceSettings] | None = None

    def resource(self, name: str) -> ResourceSettings:
        return (self.resources or {}).get(name, ResourceSettings())


def _unmanaged(pairs: tuple[tuple[str, str], ...], where: str, managed: frozenset[str],
               notes: list[str]) -> tuple[tuple[str, str], ...]:
    """A queue's or compute resource's CustomSlurmSettings (one word each, checked by the
    model) less what the twin sets itself, each of those named in ``notes``."""
    out: list[tuple[str, str]] = []
    for key, value in pairs:
        if key.lower() in managed:
            notes.append(f"{where}.{key} is managed by the twin; not applied")
            continue
        out.append((key, value))
    return tuple(out)


def queue_settings(topo: ClusterTopology, notes: list[str]) -> dict[str, QueueSettings]:
    """Each queue's partition and node settings (see :data:`QUEUE_SETTINGS`), by queue name."""
    out: dict[str, QueueSettings] = {}
    for q in topo.queues:
        resources = {
            cr.name: ResourceSettings(
                static_weight=cr.static_node_priority,
                dynamic_weight=cr.dynamic_node_priority,
                custom=_unmanaged(cr.custom_slurm_settings,
                                  f"{topo.source}: {format_path(q.path_of(cr))}"
                                  ".CustomSlurmSettings", TWIN_NODE_KEYS, notes),
                several_instance_types=len(cr.instance_types) > 1,
            )
            for cr in q.compute_resources
        }
        out[q.name] = QueueSettings(
            exclusive=q.job_exclusive_allocation,
            custom=_unmanaged(q.custom_slurm_settings,
                              f"{topo.source}: {format_path(q.path)}.CustomSlurmSettings",
                              TWIN_PARTITION_KEYS, notes),
            resources=resources,
        )
    return out
