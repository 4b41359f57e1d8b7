"""Render the twin's Slurm configuration files from a :class:`TwinPlan`.

Pure functions of the plan (no clock, no host lookups) so the output is checked against
golden files. The scheduler settings are ParallelCluster's own (``toolkit.local.pcslurm``),
with the deviations listed there (``DEVIATIONS``) applied in :func:`parallelcluster_settings`;
nodes and partitions keep ParallelCluster's names, GRES and features.
"""

from __future__ import annotations

import shlex

from toolkit.local import pcslurm
from toolkit.local.confsyntax import comment
from toolkit.local.plan import TwinNode, TwinPlan


def render_slurm_conf(plan: TwinPlan) -> str:
    s = plan.state_dir
    lines = [
        # the config's path is the user's: escaped so it cannot end the comment line
        f"# Local twin of {comment(plan.config_path)}, rendered by pctk. "
        "Do not edit: `pctk local up`",
        "# rewrites it. Queues are partitions and nodes keep ParallelCluster's names.",
        f"ClusterName={plan.cluster_name}",
        f"SlurmctldHost={plan.hostname}(127.0.0.1)",
        f"SlurmctldPort={plan.ports.slurmctld}",
        f"SlurmUser={plan.user}",
        f"SlurmdUser={plan.user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"StateSaveLocation={plan.ctld_state}",
        *([f"FirstJobId={plan.first_job_id}"] if plan.first_job_id else []),
        f"SlurmctldPidFile={s}/ctld/slurmctld.pid",
        f"SlurmctldLogFile={s}/ctld/slurmctld.log",
        # %n: every slurmd on this host gets its own spool, pid file and log
        f"SlurmdSpoolDir={s}/nodes/%n/spool",
        f"SlurmdPidFile={s}/nodes/%n/slurmd.pid",
        f"SlurmdLogFile={s}/nodes/%n/slurmd.log",
    ]
    lines += parallelcluster_settings(plan)
    if plan.accounting:
        lines += [
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={plan.ports.slurmdbd}",
            # with auth/munge this names the munge socket used towards slurmdbd
            f"AccountingStoragePass={plan.munge_socket}",
            "AccountingStorageTRES=gres/gpu",
        ]
    else:
        lines.append("AccountingStorageType=accounting_storage/none")
    if plan.custom_settings:
        lines.append("")
        lines.append("# Scheduling/SlurmSettings/CustomSlurmSettings of the cluster config")
        lines += [f"{k}={v}" for k, v in plan.custom_settings]
    lines += _task_prolog_lines(plan)
    lines.append("")
    lines.append("# Nodes: one slurmd each on its own loopback address and port")
    for n in plan.nodes:
        own = n.addr != "127.0.0.1"
        parts = [
            f"NodeName={n.name}",
            f"NodeHostname={n.host if own else plan.hostname}",
            f"NodeAddr={n.addr}",
            f"Port={n.port}",
            f"CPUs={n.cpus}",
            f"RealMemory={n.real_memory_mib}",
        ]
        if n.gres:
            parts.append(f"Gres={n.gres}")
        parts += [f"Feature={','.join(n.features)}", f"State={node_state(n)}",
                  f"Weight={n.weight}"]
        parts += [f"{k}={v}" for k, v in n.custom]
        lines.append(" ".join(parts))
    lines.append("")
    lines.append("# Partitions: one per ParallelCluster queue, the first is the default")
    extra = dict(plan.partition_settings)
    for i, (name, members) in enumerate(plan.partitions):
        lines.append(" ".join(partition_line(name, members, i == 0, extra.get(name, ()))))
    return "\n".join(lines) + "\n"


def partition_line(name: str, members: tuple[str, ...], default: bool,
                   extra: tuple[tuple[str, str], ...]) -> list[str]:
    """ParallelCluster's PartitionName line (QueueRenderer._render_partition), with the
    nodes listed (ParallelCluster names a NodeSet of the same nodes)."""
    parts = [f"PartitionName={name}", f"Nodes={','.join(members)}"]
    parts += [f"{k}={v}" for k, v in pcslurm.PARTITION_FIXED]
    if default:
        parts.append("Default=YES")
    parts += [f"{k}={v}" for k, v in extra]
    return parts


# ---------------------------------------------------------------- ParallelCluster settings
_TWIN_PLUGINS = {
    # many slurmd share one host and one cgroup tree (pcslurm.DEVIATIONS)
    "ProctrackType": "proctrack/linuxproc",
    "TaskPlugin": "task/none",
    "JobAcctGatherType": "jobacct_gather/linux",
}


def parallelcluster_settings(plan: TwinPlan) -> list[str]:
    """ParallelCluster's slurm.conf and slurm_parallelcluster.conf settings for this config,
    with the twin's deviations (pcslurm.DEVIATIONS) applied."""
    ss = plan.slurm
    lines = ["", "# ParallelCluster's settings (toolkit/local/pcslurm.py lists what the twin "
             f"changes); timers / {pcslurm.TIME_FACTOR}"]
    for key, value in pcslurm.PARALLELCLUSTER_FIXED:
        if key in pcslurm.SCALED:
            value = str(pcslurm.scaled(int(value)))
        elif key == "SlurmctldParameters":
            value = value.replace("power_save_min_interval=30",
                                  f"power_save_min_interval={pcslurm.scaled(30)}")
        elif key == "SchedulerParameters":
            value += f",batch_sched_delay={pcslurm.TWIN_BATCH_SCHED_DELAY}"
        elif key == "AuthInfo":
            # our own munged; cred_expire is a timer (and delays a requeued job's restart)
            value = f"socket={plan.munge_socket},cred_expire={pcslurm.scaled(70)}"
        elif key == "CommunicationParameters" and plan.loopback_only:
            # daemons and clients bind the address the host name resolves to (127.0.0.1
            # here) instead of 0.0.0.0; NoCtldInAddrAny is slurmctld's switch for the same
            value += ",NoInAddrAny,NoCtldInAddrAny"
        value = _TWIN_PLUGINS.get(key, value)
        lines.append(f"{key}={value}")
    select = "CR_CPU_Memory" if ss.enable_memory_based_scheduling else "CR_CPU"
    lines += [
        # nodes declare the instance's GPUs and scaled CPUs, not what this host has
        "SlurmdParameters=config_overrides",
        "JobAcctGatherFrequency=30",
        # slurm_parallelcluster.conf: from the config's SlurmSettings
        f"SelectTypeParameters={select}",
    ]
    lines += power_saving_settings(plan)
    # an update-time setting: the twin restarts on a changed config instead (docs/twin.md)
    lines.append(f"# QueueUpdateStrategy={ss.queue_update_strategy} (not applied: `pctk local up` "
                 "of a changed config cancels jobs and restarts the twin)")
    return lines


# ---------------------------------------------------------------- power saving
def power_saving_settings(plan: TwinPlan) -> list[str]:
    """ParallelCluster's power saving: dynamic nodes power up on demand through the twin's
    ResumeProgram and down after ScaledownIdletime; static nodes never (SuspendExcNodes)."""
    ss, power = plan.slurm, plan.state_dir / "bin"
    lines = [
        f"SuspendTime={ss.suspend_time}",
        f"ResumeTimeout={ss.resume_timeout}",
        f"SuspendProgram={power}/pctk-suspend",
        f"ResumeProgram={power}/pctk-resume",
        f"ResumeFailProgram={power}/pctk-suspend",
    ]
    exc = static_node_ranges(plan)
    if exc:
        lines.append(f"SuspendExcNodes={','.join(exc)}")
    return lines


def static_node_ranges(plan: TwinPlan) -> list[str]:
    """``<q>-st-<cr>-[1-N]`` per compute resource with static nodes, as ParallelCluster."""
    counts: dict[tuple[str, str], int] = {}
    for n in plan.nodes:
        if n.static:
            key = (n.partition, n.compute_resource)
            counts[key] = counts.get(key, 0) + 1
    return [f"{q}-st-{cr}-[1-{k}]" if k > 1 else f"{q}-st-{cr}-1"
            for (q, cr), k in counts.items()]


def node_state(node: TwinNode) -> str:
    """Every node is a cloud node, as on ParallelCluster (static ones are SuspendExcNodes)."""
    return "CLOUD"


def render_gres_conf(plan: TwinPlan) -> str:
    lines = [
        "# GPUs of the twin's nodes: placeholder device files, one folder per node.",
        "AutoDetect=off",
    ]
    for n in plan.nodes:
        if not n.gpu_count or not n.gres:
            continue
        gtype = n.gres.split(":")[1]
        dev = plan.node_dir(n.name) / "dev"
        rng = f"nvidia[0-{n.gpu_count - 1}]" if n.gpu_count > 1 else "nvidia0"
        lines.append(f"NodeName={n.name} Name=gpu Type={gtype} File={dev}/{rng}")
    return "\n".join(lines) + "\n"


def render_slurmdbd_conf(plan: TwinPlan, db_password: str) -> str:
    s = plan.state_dir
    # DbdAddr is only where clients reach slurmdbd; NoInAddrAny makes it bind there too
    comm = ["CommunicationParameters=NoInAddrAny"] if plan.loopback_only else []
    return "\n".join(
        [
            "# slurmdbd of the local twin, rendered by pctk (mode 0600: it holds a password)",
            "AuthType=auth/munge",
            f"AuthInfo=socket={plan.munge_socket}",
            f"DbdHost={plan.hostname}",
            "DbdAddr=127.0.0.1",
            *comm,
            f"DbdPort={plan.ports.slurmdbd}",
            f"SlurmUser={plan.user}",
            f"LogFile={s}/dbd/slurmdbd.log",
            f"PidFile={s}/dbd/slurmdbd.pid",
            "DebugLevel=info",
            "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1",
            f"StoragePort={plan.ports.mysql}",
            "StorageUser=slurm",
            f"StoragePass={db_password}",
            f"StorageLoc={plan.accounting_db}",
            "",
        ]
    )


def render_cgroup_conf() -> str:
    # slurmd reads cgroup.conf if present; the twin uses no cgroup plugins
    return "# The twin uses proctrack/linuxproc and task/none: no cgroup plugins.\n"


# ---- per-node addresses for jobs (toolkit/local/nodeaddr.py)
def _task_prolog_lines(plan: TwinPlan) -> list[str]:
    if all(n.addr == "127.0.0.1" for n in plan.nodes):
        return []
    return ["# every task speaks from its node's own address (toolkit/local/nodeaddr.py)",
            f"TaskProlog={plan.etc}/task_prolog.sh"]


def render_task_prolog(plan: TwinPlan, library: str) -> str:
    """TaskProlog: export the node's address and the library that binds sockets to it.

    Slurm reads ``export NAME=value`` lines from the prolog's output into the task's
    environment (a task's environment is the job's, not its slurmd's).
    """
    lines = ["#!/bin/sh", "# rendered by pctk: each twin node's own loopback address",
             'case "$SLURMD_NODENAME" in']
    lines += [f"  {n.name}) echo export PCTK_NODE_ADDR={n.addr} ;;" for n in plan.nodes
              if n.addr != "127.0.0.1"]
    lines += ["  *) exit 0 ;;", "esac", f"echo export LD_PRELOAD={shlex.quote(library)}", ""]
    # the library also resolves node names in this twin's own hosts file (hosts.py)
    lines.insert(len(lines) - 1, f"echo export PCTK_TWIN_HOSTS={shlex.quote(f'{plan.etc}/hosts')}")
    return "\n".join(lines)
