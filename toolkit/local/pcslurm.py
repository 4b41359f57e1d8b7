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
from typing import Any

from toolkit.config.model import ClusterTopology
from toolkit.errors import PctkError

# Twin seconds = ParallelCluster seconds / TIME_FACTOR for the clocks of a cluster's life
# (idle power-down, boot, suspend, node-death detection, kill grace, credential lifetime).
# Per-message bounds (MessageTimeout) and record retention (MinJobAge) are kept: they never
# make anyone wait, and shortening them only fails RPCs on a loaded host.
TIME_FACTOR = 6

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


# What the twin changes, and why. README.md ("What the twin changes in ParallelCluster's
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
               "SuspendTimeout", "SlurmctldParameters", "SuspendTime", "ResumeTimeout"),
              "300, 180, 180, 30, 120, power_save_min_interval=30, ScaledownIdletime x 60, "
              "ComputeNodeBootstrapTimeout", f"divided by TIME_FACTOR={TIME_FACTOR}",
              "the cluster's clocks run faster so tests see power-down, node failure and kill "
              "in seconds; MessageTimeout (one RPC's bound) and MinJobAge are kept"),
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

    scaledown_idletime: int = 10  # minutes; -1: never power down
    enable_memory_based_scheduling: bool = False
    queue_update_strategy: str = "COMPUTE_FLEET_STOP"
    bootstrap_timeout: int = 1800  # DevSettings/Timeouts/ComputeNodeBootstrapTimeout, seconds

    @property
    def suspend_time(self) -> int:
        """SuspendTime on the twin: ScaledownIdletime x 60 / TIME_FACTOR (-1 stays -1)."""
        if self.scaledown_idletime == -1:
            return -1
        return max(1, self.scaledown_idletime * 60 // TIME_FACTOR)

    @property
    def resume_timeout(self) -> int:
        return max(10, self.bootstrap_timeout // TIME_FACTOR)


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def slurm_settings(topo: ClusterTopology) -> SlurmSettings:
    raw = topo.extra.get("raw") if isinstance(topo.extra, dict) else None
    ss = _get(raw, "Scheduling", "SlurmSettings") or {}
    where = f"{topo.source}: Scheduling.SlurmSettings"
    idle = ss.get("ScaledownIdletime", 10) if isinstance(ss, dict) else 10
    if isinstance(idle, bool) or not isinstance(idle, int) or (idle < 1 and idle != -1):
        raise PctkError(f"{where}.ScaledownIdletime: expected minutes >= 1 or -1, got {idle!r}")
    mem = bool(ss.get("EnableMemoryBasedScheduling")) if isinstance(ss, dict) else False
    strategy = ss.get("QueueUpdateStrategy") if isinstance(ss, dict) else None
    boot = _get(raw, "DevSettings", "Timeouts", "ComputeNodeBootstrapTimeout")
    return SlurmSettings(
        scaledown_idletime=idle,
        enable_memory_based_scheduling=mem,
        queue_update_strategy=strategy if isinstance(strategy, str) else "COMPUTE_FLEET_STOP",
        bootstrap_timeout=boot if isinstance(boot, int) and boot > 0 else 1800,
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
STATIC_NODE_PRIORITY = 1  # StaticNodePriority's default: Weight= of static nodes
DYNAMIC_NODE_PRIORITY = 1000  # DynamicNodePriority's default: Weight= of dynamic nodes


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


def _custom(raw: Any, where: str, managed: frozenset[str],
            notes: list[str]) -> tuple[tuple[str, str], ...]:
    """``CustomSlurmSettings: {Key: Value}`` of a queue or compute resource, one word each:
    nothing but ``Key=Value`` can come out of an entry (a value with a space or '=' would add
    another attribute to the line)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise PctkError(f"{where}: expected a mapping like {{Key: Value}}")
    out: list[tuple[str, str]] = []
    for key, value in raw.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not isinstance(key, str) or not key.isalnum() or not key[:1].isalpha():
            raise PctkError(f"{where}: {key!r} is not a Slurm parameter name")
        if isinstance(value, (dict, list)) or not text or any(c.isspace() for c in text):
            raise PctkError(f"{where}.{key}: the value must be one word (no spaces or newlines)")
        if key.lower() in managed:
            notes.append(f"{where}.{key} is managed by the twin; not applied")
            continue
        out.append((key, text))
    return tuple(out)


def _priority(value: Any, where: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PctkError(f"{where}: expected a whole number >= 0, got {value!r}")
    return value


def queue_settings(topo: ClusterTopology, notes: list[str]) -> dict[str, QueueSettings]:
    """Each queue's partition and node settings (see :data:`QUEUE_SETTINGS`), by queue name."""
    raw = topo.extra.get("raw") if isinstance(topo.extra, dict) else None
    queues = _get(raw, "Scheduling", "SlurmQueues")
    out: dict[str, QueueSettings] = {}
    for qi, rq in enumerate(queues if isinstance(queues, list) else []):
        if not isinstance(rq, dict) or not isinstance(rq.get("Name"), str):
            continue
        qwhere = f"{topo.source}: Scheduling.SlurmQueues[{qi}]"
        resources: dict[str, ResourceSettings] = {}
        crs = rq.get("ComputeResources")
        for ci, rc in enumerate(crs if isinstance(crs, list) else []):
            if not isinstance(rc, dict) or not isinstance(rc.get("Name"), str):
                continue
            cwhere = f"{qwhere}.ComputeResources[{ci}]"
            instances = rc.get("Instances")
            resources[rc["Name"]] = ResourceSettings(
                static_weight=_priority(rc.get("StaticNodePriority"),
                                        f"{cwhere}.StaticNodePriority", STATIC_NODE_PRIORITY),
                dynamic_weight=_priority(rc.get("DynamicNodePriority"),
                                         f"{cwhere}.DynamicNodePriority", DYNAMIC_NODE_PRIORITY),
                custom=_custom(rc.get("CustomSlurmSettings"), f"{cwhere}.CustomSlurmSettings",
                               TWIN_NODE_KEYS, notes),
                several_instance_types=(rc.get("InstanceType") is None
                                        and isinstance(instances, list) and len(instances) > 1),
            )
        out[rq["Name"]] = QueueSettings(
            exclusive=rq.get("JobExclusiveAllocation") is True,
            custom=_custom(rq.get("CustomSlurmSettings"), f"{qwhere}.CustomSlurmSettings",
                           TWIN_PARTITION_KEYS, notes),
            resources=resources,
        )
    return out
