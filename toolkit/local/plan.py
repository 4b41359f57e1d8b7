"""Turn a ParallelCluster config into the shape of the local twin: nodes, partitions, ports.

The twin keeps ParallelCluster's names (each queue a partition, nodes ``<q>-st-<cr>-<i>`` and
``<q>-dy-<cr>-<i>``) and the instances' real GPU counts as GRES, but scales CPUs and memory
down to what this machine has.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import pwd
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from toolkit import catalog
from toolkit.config.model import ClusterTopology
from toolkit.errors import PctkError
from toolkit.local import confsyntax as syntax
from toolkit.local.nodeaddr import compiler
from toolkit.local.pcslurm import QueueSettings, SlurmSettings, queue_settings, slurm_settings

# slurm.conf parameters the twin must set itself (hosts, ports, paths, users, plugins that
# let many slurmd share one machine); a config's CustomSlurmSettings for them are not applied
TWIN_MANAGED = frozenset(k.lower() for k in (
    "ClusterName", "SlurmctldHost", "ControlMachine", "SlurmctldPort", "SlurmdPort",
    "SlurmUser", "SlurmdUser", "StateSaveLocation", "ProctrackType", "TaskPlugin",
    "SlurmdParameters", "GresTypes", "JobCompType", "MpiDefault", "CommunicationParameters",
    # power saving runs the twin's own programs (ParallelCluster refuses these too)
    "SuspendProgram", "ResumeProgram", "ResumeFailProgram",
))
TWIN_MANAGED_PREFIXES = ("auth", "cred", "accountingstorage", "slurmctldpid", "slurmctldlog",
                         "slurmdpid", "slurmdlog", "slurmdspool", "cgroup")
# `--nodes` unset: every compute resource gets its MaxCount, up to MAX_TWIN_NODES in all;
# measured on a 2-core, 24 GiB machine: 64 slurmd are idle 3.7 s after start, ~6.5 MiB RSS
# each, and a 64-node srun job completes; more would share 2 cores among too many daemons
MAX_TWIN_NODES = 64


@dataclass(frozen=True)
class TwinNode:
    name: str
    partition: str
    instance_type: str
    compute_resource: str
    static: bool
    cpus: int
    real_memory_mib: int
    gres: str | None  # "gpu:h100:8"
    gpu_count: int
    features: tuple[str, ...]
    port: int
    # the node's own loopback address (see node_address): traffic to one node can be told
    # apart from traffic to another, so one node's link can be shaped alone
    addr: str = "127.0.0.1"
    # StaticNodePriority / DynamicNodePriority (ParallelCluster's Weight=)
    weight: int = 1
    # the compute resource's CustomSlurmSettings, appended to its NodeName line
    custom: tuple[tuple[str, str], ...] = ()

    @property
    def host(self) -> str:
        """The node's host name: its slurmd's (and jobs') own, ``ip-127-0-x-y``."""
        return node_host(self.addr)


@dataclass(frozen=True)
class Ports:
    slurmctld: int
    slurmdbd: int
    mysql: int
    slurmd_base: int

    def all(self, n_nodes: int) -> list[int]:
        return [self.slurmctld, self.slurmdbd, self.mysql] + [
            self.slurmd_base + i for i in range(n_nodes)
        ]

    def to_json(self) -> dict[str, int]:
        return {"slurmctld": self.slurmctld, "slurmdbd": self.slurmdbd, "mysql": self.mysql,
                "slurmd_base": self.slurmd_base}

    @classmethod
    def from_json(cls, d: object) -> Ports | None:
        """As recorded in twin.json; None when absent or malformed."""
        if not isinstance(d, dict):
            return None
        try:
            return cls(*(int(d[k]) for k in ("slurmctld", "slurmdbd", "mysql", "slurmd_base")))
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class TwinPlan:
    cluster_name: str
    config_path: str
    hostname: str
    state_dir: Path
    nodes: tuple[TwinNode, ...]
    partitions: tuple[tuple[str, tuple[str, ...]], ...]  # (name, node names) in config order
    ports: Ports
    accounting: bool
    user: str
    notes: tuple[str, ...] = field(default=())
    custom_settings: tuple[tuple[str, str], ...] = field(default=())
    # True when the daemons bind 127.0.0.1 alone, not every interface
    loopback_only: bool = False
    # Scheduling/SlurmSettings that shape slurm.conf (toolkit.local.pcslurm)
    slurm: SlurmSettings = field(default=SlurmSettings())
    # per partition, what ParallelCluster adds after ``MaxTime=INFINITE State=UP``:
    # OverSubscribe=EXCLUSIVE (JobExclusiveAllocation), the queue's CustomSlurmSettings
    partition_settings: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = field(default=())
    # the Slurm release of a built image ("24.11"), "" for the system's: each release keeps
    # its own controller state and accounting database (Slurm reads state of at most two
    # releases back and never of a newer one), so switching releases loses neither
    slurm_release: str = ""
    # slurm.conf FirstJobId (0: Slurm's own, 1); read only when the controller has no state
    first_job_id: int = 0

    @property
    def ctld_state(self) -> Path:
        """StateSaveLocation."""
        tag = f"-{self.slurm_release}" if self.slurm_release else ""
        return self.state_dir / "ctld" / f"state{tag}"

    @property
    def accounting_db(self) -> str:
        """slurmdbd's StorageLoc (a MariaDB database name)."""
        tag = f"_{self.slurm_release.replace('.', '_')}" if self.slurm_release else ""
        return f"slurm_acct_db{tag}"

    @property
    def etc(self) -> Path:
        return self.state_dir / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.state_dir / "munge" / "munge.socket.2"

    def node_dir(self, node: str) -> Path:
        return self.state_dir / "nodes" / node

    def gpu_files(self, node: TwinNode) -> list[Path]:
        return [self.node_dir(node.name) / "dev" / f"nvidia{i}" for i in range(node.gpu_count)]


def host_resources() -> tuple[int, int]:
    """(cores, memory in MiB) of this machine."""
    cores = os.cpu_count() or 1
    mem_mib = 1024
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_mib = int(line.split()[1]) // 1024
                break
    except OSError:
        pass
    return cores, mem_mib


def slurm_cluster_name(name: str) -> str:
    """Slurm wants lowercase cluster names without odd characters (they name DB tables)."""
    clean = re.sub(r"[^a-z0-9_]", "_", name.lower()).strip("_") or "twin"
    if clean[0].isdigit():
        clean = f"c_{clean}"
    return clean[:40]


def machine_cap(topo: ClusterTopology, limit: int = MAX_TWIN_NODES) -> int:
    """The largest per-resource node count that keeps the whole twin within ``limit`` nodes.

    Every compute resource keeps its MaxCount when they fit together; otherwise the biggest
    are cut down evenly, so small queues stay whole.
    """
    counts = [cr.max_count for q in topo.queues for cr in q.compute_resources]
    if sum(counts) <= limit:
        return max(counts, default=1)
    cap = 1
    while sum(min(c, cap + 1) for c in counts) <= limit:
        cap += 1
    return cap


def mount_dirs(topo: ClusterTopology) -> list[str]:
    """SharedStorage MountDirs of the config (``/fsx``, ``/home``...), in config order."""
    dirs: list[str] = []
    for storage in topo.shared_storage:
        mount = storage.mount_dir
        if mount is not None and mount.startswith("/") and mount not in dirs:
            dirs.append(mount)
    return dirs


def build_plan(
    topo: ClusterTopology,
    state_dir: Path,
    ports: Ports,
    *,
    nodes_per_resource: int | None = None,
    accounting: bool = True,
    hostname: str | None = None,
    host: tuple[int, int] | None = None,
    user: str | None = None,
    host_address: str | None = None,
    node_addresses: bool | None = None,
    slurm_release: str = "",
    first_job_id: int = 0,
) -> TwinPlan:
    if nodes_per_resource is not None and nodes_per_resource < 1:
        raise PctkError(f"--nodes must be at least 1 (got {nodes_per_resource})")
    cap = nodes_per_resource if nodes_per_resource is not None else machine_cap(topo)
    cores, mem_mib = host or host_resources()
    # each node as the config shapes it; port, address and memory follow once all are known
    specs: list[TwinNode] = []
    partitions: list[tuple[str, tuple[str, ...]]] = []
    notes: list[str] = []
    settings = queue_settings(topo, notes)
    part_settings: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for q in topo.queues:
        members: list[str] = []
        qs = settings.get(q.name) or QueueSettings()
        part_settings.append((q.name, ((("OverSubscribe", "EXCLUSIVE"),) if qs.exclusive
                                       else ()) + qs.custom))
        for cr in q.compute_resources:
            rs = qs.resource(cr.name)
            inst = catalog.find(cr.instance_type)
            acc = inst.accelerator if inst else None
            gpus = acc.count if acc and acc.kind == "gpu" else 0
            vcpus = inst.vcpus if inst else cores
            if cr.disable_hyperthreading:
                vcpus = max(1, vcpus // 2)
            # one task per GPU must fit, even though the twin's cores are shared
            cpus = max(gpus, min(vcpus, cores))
            gres = f"gpu:{acc.gres_type}:{gpus}" if acc and gpus else None
            # ParallelCluster names no instance type when a resource has several
            features = ["static", cr.name] if rs.several_instance_types else [
                "static", cr.instance_type, cr.name]
            if cr.efa:
                features.append("efa")
            if gpus:
                features.append("gpu")
            names = cr.node_names(q.name, limit=cap)
            if cr.min_count > cr.max_count:
                notes.append(f"{q.name}/{cr.name}: MinCount {cr.min_count} is above MaxCount "
                             f"{cr.max_count} (ParallelCluster refuses it): {cr.max_count} "
                             "static nodes")
            if cr.max_count > cap:
                why = (f"--nodes {cap}" if nodes_per_resource is not None else
                       f"this machine holds at most {MAX_TWIN_NODES} twin nodes")
                notes.append(f"capped: {q.name}/{cr.name} has {len(names)} of its "
                             f"{cr.max_count} nodes ({why})")
            if inst is None:
                notes.append(f"{cr.instance_type}: facts unknown (not in the pctk catalog): no "
                             "GRES, host CPUs used")
            for n in names:
                static = "-st-" in n
                feats = tuple(["static" if static else "dynamic", *features[1:]])
                specs.append(TwinNode(
                    name=n, partition=q.name, instance_type=cr.instance_type,
                    compute_resource=cr.name, static=static, cpus=cpus, real_memory_mib=0,
                    gres=gres, gpu_count=gpus, features=feats, port=0,
                    weight=rs.static_weight if static else rs.dynamic_weight,
                    custom=rs.custom))
                members.append(n)
        partitions.append((q.name, tuple(members)))
    if len(specs) > MAX_TWIN_NODES:
        raise PctkError(
            f"the twin would have {len(specs)} nodes; this machine holds at most {MAX_TWIN_NODES}",
            "lower --nodes (nodes per compute resource)",
        )
    if node_addresses is None:
        node_addresses = own_host_names_possible()
    if not node_addresses:
        notes.append("every node shares 127.0.0.1 (giving each its own address needs root, "
                     "unshare and a C compiler): `pctk local fault slow-net` is unavailable")
    mem_per_node = max(256, min(mem_mib // max(1, len(specs)), 64 * 1024))
    nodes = tuple(
        dataclasses.replace(
            spec,
            real_memory_mib=mem_per_node,
            port=ports.slurmd_base + i,
            addr=node_address(ports.slurmd_base + i) if node_addresses else "127.0.0.1",
        )
        for i, spec in enumerate(specs)
    )
    custom: list[tuple[str, str]] = []
    for key, value in topo.custom_slurm_settings:
        if key.lower() in TWIN_MANAGED or key.lower().startswith(TWIN_MANAGED_PREFIXES):
            notes.append(f"CustomSlurmSettings {key} is managed by the twin; not applied")
        else:
            custom.append((key, value))
    if host_address is None:
        host_address = resolve_host_address()
    # Slurm binds the host name's address (or 0.0.0.0) and so does srun; a step's tasks
    # reach srun from 127.0.0.1, the source of every loopback connection, so only that works
    loopback_only = host_address == "127.0.0.1"
    if not loopback_only:
        notes.append(
            f"Slurm daemons listen on every interface: this host's name resolves to "
            f"{host_address or 'nothing'}, and Slurm 22.05 binds either to that address or "
            "to all; map the host name to 127.0.0.1 in /etc/hosts to keep them on loopback")
    return check_plan(TwinPlan(
        cluster_name=slurm_cluster_name(topo.name),
        config_path=topo.source,
        hostname=hostname or socket.gethostname().split(".")[0],
        state_dir=state_dir,
        nodes=nodes,
        partitions=tuple(partitions),
        ports=ports,
        accounting=accounting,
        user=user or _current_user(),
        notes=tuple(notes),
        custom_settings=tuple(custom),
        loopback_only=loopback_only,
        slurm=slurm_settings(topo),
        partition_settings=tuple(part_settings),
        slurm_release=slurm_release,
        first_job_id=first_job_id,
    ))


def check_plan(plan: TwinPlan) -> TwinPlan:
    """The plan, once every user-given value in it can go into the daemons' files as it is
    (:mod:`toolkit.local.confsyntax`); a one-line PctkError names the first that cannot.
    The config's path is free: it only reaches comments, escaped."""
    where = f"{syntax.comment(plan.config_path)}:"
    syntax.slurm_path(str(plan.state_dir), "the twin's state folder")
    syntax.host_name(plan.hostname, "this host's name")
    syntax.user_name(plan.user, "the Slurm user")
    syntax.slurm_value(plan.cluster_name, "the cluster name")
    for name, _ in plan.partitions:
        syntax.slurm_name(name, f"{where} queue name")
    for n in plan.nodes:
        syntax.slurm_name(n.compute_resource, f"{where} compute resource name")
        syntax.instance_type(n.instance_type, f"{where} InstanceType")
        syntax.slurm_name(n.name, "node name")
        for key, value in n.custom:
            syntax.slurm_key(key, f"{where} {n.compute_resource} CustomSlurmSettings key")
            syntax.slurm_value(value, f"{where} {n.compute_resource} CustomSlurmSettings {key}")
    for name, settings in plan.partition_settings:
        for key, value in settings:
            syntax.slurm_key(key, f"{where} queue {name} CustomSlurmSettings key")
            syntax.slurm_value(value, f"{where} queue {name} CustomSlurmSettings {key}")
    for key, value in plan.custom_settings:
        syntax.slurm_key(key, f"{where} CustomSlurmSettings key")
        syntax.slurm_value(value, f"{where} CustomSlurmSettings {key}")
    return plan


# ---- per-node loopback addresses
def node_address(port: int) -> str:
    """The twin node's own address, 127.0.<port / 256>.<port % 256>.

    Derived from the node's slurmd port, which is unique among the twins running on this
    machine, so two twins never share an address (and shaping one twin's node never touches
    another's). Ports start at 10000, so it is never 127.0.0.1; every 127.0.0.0/8 address is
    local on Linux without configuring anything.
    """
    if not 256 <= port <= 65535:
        return "127.0.0.1"  # a placeholder plan (ports not chosen yet)
    return f"127.0.{port >> 8}.{port & 0xFF}"


def node_host(addr: str) -> str:
    """A node's host name, unique among running twins (ParallelCluster's are ip-10-0-1-2).

    Each slurmd runs in its own UTS namespace under this name, so it binds this address
    (CommunicationParameters=NoInAddrAny binds what gethostname() resolves to) and so do
    its jobs' gloo ranks (torch binds the host name's address). The node's own name cannot
    serve: other twins' hosts blocks may map the same ParallelCluster names elsewhere.
    """
    return "ip-" + addr.replace(".", "-")


def own_host_names_possible() -> bool:
    """Root with ``unshare`` (a host name per slurmd) and a C compiler (see nodeaddr.py)."""
    return os.geteuid() == 0 and shutil.which("unshare") is not None and compiler() is not None


def resolve_host_address() -> str:
    """The IPv4 address this host's name resolves to ('' when it does not resolve).

    With CommunicationParameters=NoInAddrAny/NoCtldInAddrAny, Slurm 22.05 daemons bind to
    exactly this address (slurm_setup_addr: gethostname() then getaddrinfo()) instead of
    0.0.0.0; there is no option to name another bind address.
    """
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return ""



def _current_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def port_free(port: int) -> bool:
    for addr in ("0.0.0.0", "127.0.0.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((addr, port))
            except OSError:
                return False
    return True


@contextlib.contextmanager
def port_lock() -> Iterator[None]:
    """Serialise port choice and daemon start between twins starting at the same time.

    Otherwise two twins can both find the same ports free and collide a second later.
    """
    path = Path(tempfile.gettempdir()) / "pctk-twin-ports.lock"
    with open(path, "a") as fh:
        with contextlib.suppress(PermissionError):
            os.chmod(path, 0o666)
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# A twin on a built Slurm release numbers its jobs from here, the system Slurm's from 1: a job
# id names one job across both (pctk logs' index of job folders), and two twins of different
# releases running at once (make test's two legs) give their jobs different rendezvous ports
# (20000 + job id mod 12000 in batch scripts, 20000 + (7 x job id + step) mod 12000 in
# benchmarks/distenv.py: an offset of 6000 ids, half the span, moves both by 6000, since
# 7 x 6000 = 6000 mod 12000; two jobs meet only some 6,000 jobs apart).
RELEASE_FIRST_JOB_ID = 6001
MAX_FIRST_JOB_ID = 0x3FFFFFF  # Slurm's largest job id (MAX_JOB_ID 0x03FFFFFF)


def first_job_id(slurm_release: str) -> int:
    """FirstJobId for a new twin: ``PCTK_TWIN_FIRST_JOB_ID`` when set (several twins of one
    release that run torch jobs at once: their jobs' rendezvous ports follow the job id),
    else RELEASE_FIRST_JOB_ID for a built release and 0 (Slurm's 1) for the system's."""
    env = os.environ.get("PCTK_TWIN_FIRST_JOB_ID")
    if env is None:
        return RELEASE_FIRST_JOB_ID if slurm_release else 0
    if not env.isascii() or not env.isdigit() or not 1 <= int(env) <= MAX_FIRST_JOB_ID:
        raise PctkError(f"PCTK_TWIN_FIRST_JOB_ID={env!r} is not a job id",
                        f"give a whole number from 1 to {MAX_FIRST_JOB_ID}, or unset it")
    return int(env)


# Where a twin's daemons listen, in blocks of 200 (ctld, dbd, mysql, one per slurmd): around the
# ports that jobs take for their rendezvous, 20000-31999 (20000 + job id mod 12000 in batch
# scripts, toolkit/submit/jobspec.py; 20000 + (7 x job id + step) mod 12000 in
# benchmarks/distenv.py). A torch store listens on every address of its port, so a daemon on one
# of those would fail the job whose id lands on it. Below 20000 first: that is also below the
# kernel's ephemeral ports (32768 up), which any outgoing connection may hold for a while.
PORT_BLOCKS = (range(10000, 20000, 200), range(40000, 60000, 200))


def port_base(n_nodes: int = 0) -> int | None:
    """``PCTK_TWIN_PORT_BASE`` (the twin's first port; ctld, dbd, mysql, then one per slurmd)
    when set; a value that is not a port, or leaves no room for the block, is an error."""
    env = os.environ.get("PCTK_TWIN_PORT_BASE")
    if env is None:
        return None
    last = 65534 - (3 + n_nodes)  # as choose_ports: the whole block below 65535
    if not env.isascii() or not env.isdigit() or not 1024 <= int(env) <= last:
        raise PctkError(f"PCTK_TWIN_PORT_BASE={env!r} is not a port a twin can start from",
                        f"give a whole number from 1024 to {last} (10000-19999 or 40000-59999 "
                        "keep clear of the jobs' rendezvous ports), or unset it")
    return int(env)


def choose_ports(n_nodes: int, prefer: int | None = None) -> Ports:
    """A contiguous block of free ports: ctld, dbd, mysql, then one per slurmd."""
    want = 3 + n_nodes
    candidates = [prefer] if prefer else []
    env = port_base(n_nodes)
    if env is not None:
        candidates.insert(0, env)
    candidates += [base for block in PORT_BLOCKS for base in block]
    for base in candidates:
        if base is None or base + want >= 65535:
            continue
        if all(port_free(base + i) for i in range(want)):
            return Ports(base, base + 1, base + 2, base + 3)
        if env is not None and base == env:
            raise PctkError(
                f"ports {base}-{base + want - 1} (PCTK_TWIN_PORT_BASE) are not all free",
                "choose another PCTK_TWIN_PORT_BASE or unset it",
            )
    raise PctkError(f"no block of {want} free TCP ports found in 10000-19999 or 40000-59999",
                    "stop twins you no longer use (pctk local down, or pctk local gc)")
