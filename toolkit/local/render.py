"""Render the twin's Slurm configuration files from a :class:`TwinPlan`.

Pure functions of the plan (no clock, no host lookups) so the output is checked against
golden files. Settings mirror ParallelCluster's defaults where they matter to users
(``select/cons_tres`` with ``CR_CPU``, one partition per queue, GRES GPUs, node features)
and differ where one machine must hold many nodes (``proctrack/linuxproc``, ``task/none``,
``config_overrides``).
"""

from __future__ import annotations

from toolkit.local.plan import TwinPlan


def render_slurm_conf(plan: TwinPlan) -> str:
    s = plan.state_dir
    lines = [
        f"# Local twin of {plan.config_path}, rendered by pctk. Do not edit: `pctk local up`",
        "# rewrites it. Queues are partitions and nodes keep ParallelCluster's names.",
        f"ClusterName={plan.cluster_name}",
        f"SlurmctldHost={plan.hostname}(127.0.0.1)",
        f"SlurmctldPort={plan.ports.slurmctld}",
        f"SlurmUser={plan.user}",
        f"SlurmdUser={plan.user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # our own munged, not the system one. cred_expire also delays a requeued job's
        # restart (120 s by default); the twin restarts after 10 s so requeue tests are quick
        f"AuthInfo=socket={plan.munge_socket},cred_expire=10",
        f"StateSaveLocation={s}/ctld/state",
        f"SlurmctldPidFile={s}/ctld/slurmctld.pid",
        f"SlurmctldLogFile={s}/ctld/slurmctld.log",
        # %n: every slurmd on this host gets its own spool, pid file and log
        f"SlurmdSpoolDir={s}/nodes/%n/spool",
        f"SlurmdPidFile={s}/nodes/%n/slurmd.pid",
        f"SlurmdLogFile={s}/nodes/%n/slurmd.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # many slurmd share one host: no cgroup hierarchy per node
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        # nodes declare the instance's GPUs and scaled CPUs, not what this host has
        "SlurmdParameters=config_overrides",
        "MpiDefault=none",
        "ReturnToService=2",
        # as on ParallelCluster: CPU-based selection, GPUs as GRES
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "GresTypes=gpu",
        "JobAcctGatherType=jobacct_gather/linux",
        "JobAcctGatherFrequency=30",
        "JobCompType=jobcomp/none",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "MessageTimeout=20",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=300",
        "Waittime=0",
    ]
    if plan.loopback_only:
        # daemons and clients bind the address the host name resolves to (127.0.0.1 here)
        # instead of 0.0.0.0; NoCtldInAddrAny is slurmctld's switch for the same
        lines.append("CommunicationParameters=NoInAddrAny,NoCtldInAddrAny")
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
        parts += [f"Feature={','.join(n.features)}", "State=UNKNOWN"]
        lines.append(" ".join(parts))
    lines.append("")
    lines.append("# Partitions: one per ParallelCluster queue, the first is the default")
    for i, (name, members) in enumerate(plan.partitions):
        default = "YES" if i == 0 else "NO"
        lines.append(
            f"PartitionName={name} Nodes={','.join(members)} Default={default} "
            "MaxTime=INFINITE State=UP OverSubscribe=NO"
        )
    return "\n".join(lines) + "\n"


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
            "StorageLoc=slurm_acct_db",
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
    lines += ["  *) exit 0 ;;", "esac", f"echo export LD_PRELOAD={library}", ""]
    return "\n".join(lines)
