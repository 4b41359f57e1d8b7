"""The local twin: start, inspect and stop a real Slurm cluster on this machine.

``Twin(state_dir).up(config)`` renders the configuration, starts munged, MariaDB + slurmdbd
(accounting, on by default), slurmctld and one slurmd per static node, and returns when those
nodes are idle, the dynamic ones powered down (``idle~``, powered up on demand by
:mod:`toolkit.local.power`) and ``sacct`` answers. Every daemon runs in the foreground of its
own session; its pid and start time go into ``twin.json`` (a node's slurmd also into
``nodes/<node>/slurmd.json``) so ``down`` stops exactly those processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.config.model import ClusterTopology, load_topology
from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_bytes, atomic_write_json, atomic_write_text
from toolkit.local import faults, mariadb, mounts, nodeaddr, power, procs
from toolkit.local.plan import (
    Ports,
    TwinPlan,
    build_plan,
    choose_ports,
    mount_dirs,
    port_free,
    slurm_cluster_name,
)
from toolkit.local.render import (
    render_cgroup_conf,
    render_gres_conf,
    render_slurm_conf,
    render_slurmdbd_conf,
    render_task_prolog,
)
from toolkit.paths import DEFAULT_PRESET, config_or_preset, preset_path

# 2: nodes_per_resource None means the config's counts (1 stored the default 4)
STATE_VERSION = 2
HOSTS_FILE = Path(os.environ.get("PCTK_HOSTS_FILE", "/etc/hosts"))
APT_HINT = "apt-get install -y slurm-wlm slurmdbd munge mariadb-server (or `make deps`)"
SLURM_BINARIES = ("slurmctld", "slurmd", "scontrol", "sinfo", "squeue", "sbatch", "srun", "scancel")
ACCOUNTING_BINARIES = ("slurmdbd", "sacct", "sacctmgr", "mariadbd", "mariadb-install-db", "mariadb")

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass
class TwinStatus:
    state_dir: Path
    running: bool
    config: str | None
    cluster: str | None
    daemons: list[dict[str, Any]]
    nodes: list[dict[str, str]]
    partitions: list[str]
    accounting: bool
    notes: list[str] = dataclasses.field(default_factory=list)  # what `up` capped or skipped
    mounts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # the power programs' latest steps (power-up, slurmd started, power-down, capacity faults)
    power_events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # faults.json: slow-net/slow-cpu (faults.py) and armed capacity faults (capacity.py)
    faults: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def state(self) -> str:
        """running (every daemon up), degraded (some died) or stopped (none up)."""
        if self.running:
            return "running"
        return "degraded" if any(d["running"] for d in self.daemons) else "stopped"

    @property
    def dead_daemons(self) -> list[str]:
        """Daemons that died while others still run (empty unless degraded)."""
        if self.state != "degraded":
            return []
        return [d["name"] for d in self.daemons if not d["running"]]

    def to_json(self) -> dict[str, Any]:
        return {
            "state_dir": str(self.state_dir),
            "state": self.state,
            "dead_daemons": self.dead_daemons,
            "running": self.running,
            "config": self.config,
            "cluster": self.cluster,
            "accounting": self.accounting,
            "daemons": self.daemons,
            "partitions": self.partitions,
            "nodes": self.nodes,
            "notes": self.notes,
            "mounts": self.mounts,
            "power_events": self.power_events,
            "faults": self.faults,
        }


@contextlib.contextmanager
def _port_lock() -> Iterator[None]:
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


def _node_ready(state: str, kept_drained: bool, dynamic: bool = False) -> bool:
    if state in ("idle", "mixed", "allocated"):
        return True
    if dynamic and state == "idle~":
        return True  # powered down until a job needs it, as on ParallelCluster
    base = state.rstrip("~#%!")
    return kept_drained and base in ("drained", "draining", "drain")


def _faults(state_dir: Path) -> dict[str, Any]:
    """faults.json as armed by `pctk local fault` (empty when none)."""
    try:
        data = json.loads((state_dir / "faults.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if v} if isinstance(data, dict) else {}


def make_placeholder_device(path: Path) -> None:
    """A stand-in GPU device file that Slurm accepts: a character device like /dev/null.

    gres.conf ``File=`` must name character devices (else no CUDA_VISIBLE_DEVICES); where
    mknod is not allowed, a symlink to /dev/null serves the same purpose.
    """
    if path.is_char_device():
        return
    if path.exists() or path.is_symlink():
        path.unlink()
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        path.symlink_to("/dev/null")


def missing_binaries(accounting: bool) -> list[str]:
    names = SLURM_BINARIES + ("munged",) + (ACCOUNTING_BINARIES if accounting else ())
    return [n for n in names if shutil.which(n) is None]


def resolve_config(config: str | os.PathLike[str] | None) -> Path:
    """A file path, or the name of a preset in cluster-configs/ (default: the p5 preset)."""
    if config is None:
        return preset_path(DEFAULT_PRESET)
    p = config_or_preset(config)
    if p.exists():
        return p.resolve()
    from toolkit.paths import list_presets

    raise PctkError(
        f"cluster config {config!s} not found",
        f"give a YAML file or a preset: {', '.join(list_presets())}",
    )


class Twin:
    """A local Slurm cluster rooted at one state folder."""

    def __init__(self, state_dir: str | os.PathLike[str] | None = None,
                 root: str | os.PathLike[str] | None = None):
        if state_dir is None:
            # no folder named: the twin meant under the twin root (running, else last started)
            from toolkit.local.clusters import select

            meant: Twin = select(root)
            state_dir, root = meant.state_dir, meant.root
        self.state_dir: Path = Path(state_dir).absolute()
        self.state_file = self.state_dir / "twin.json"
        # the folder of all twins (one per cluster) this one belongs to; see toolkit.local.clusters
        self.root: Path = Path(root).absolute() if root else self.state_dir

    # ---------------------------------------------------------------- state
    def _load_state(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError):
            return None  # a torn or foreign file: treat as crashed
        return data if isinstance(data, dict) else None

    def _procs(self, state: dict[str, Any] | None) -> list[procs.Proc]:
        """What `up` started, with each node's slurmd as the power programs last recorded it
        (a replaced static node has a new slurmd; a powered-up dynamic node has one)."""
        if not state:
            return []
        try:
            started = [procs.Proc.from_json(d) for d in state.get("procs", [])]
        except (KeyError, TypeError, ValueError):
            return []
        out: list[procs.Proc] = []
        seen: set[str] = set()
        for p in started:
            if p.name.startswith("slurmd:"):
                node = p.name.split(":", 1)[1]
                seen.add(node)
                now = power.recorded_slurmd(self.state_dir, node)
                if now is None:
                    continue  # stopped on purpose: being replaced
                p = now
            out.append(p)
        for p in power.recorded(self.state_dir):
            if p.name.startswith("slurmd:") and p.name.split(":", 1)[1] not in seen:
                out.append(p)  # a powered-up dynamic node
        return out

    def _set_boot_delay(self, boot_delay: float) -> None:
        cfg = power.load_config(self.state_dir)
        if cfg and cfg.get("boot_delay") != boot_delay:
            cfg["boot_delay"] = boot_delay
            atomic_write_json(self.state_dir / power.CONFIG, cfg)

    @property
    def slurm_conf(self) -> Path:
        return self.state_dir / "etc" / "slurm.conf"

    def env(self) -> dict[str, str]:
        """Variables that point Slurm's commands (and submitit) at this twin."""
        return {"SLURM_CONF": str(self.slurm_conf), "PCTK_TWIN_DIR": str(self.root)}

    def _cmd_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env())
        return env

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / ".lock", "w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise PctkError(
                    f"another pctk is starting or stopping the twin in {self.state_dir}",
                    "wait for it to finish",
                ) from None
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def any_daemon_up(self) -> bool:
        """Running or degraded: some process `up` started is still alive (no Slurm query)."""
        return any(procs.is_running(p) for p in self._procs(self._load_state()))

    def is_running(self) -> bool:
        ps = self._procs(self._load_state())
        return bool(ps) and all(procs.is_running(p) for p in ps)

    # ---------------------------------------------------------------- up
    def up(
        self,
        config: str | os.PathLike[str] | None = None,
        *,
        nodes: int | None = None,
        accounting: bool = True,
        progress: Progress = _quiet,
        timeout: float = 90.0,
        boot_delay: float = power.DEFAULT_BOOT_DELAY,
    ) -> TwinStatus:
        if boot_delay < 0:
            raise PctkError(f"--boot-delay must be 0 or more seconds (got {boot_delay:g})")
        cfg = resolve_config(config)
        topo = load_topology(cfg)
        cfg_hash = hashlib.sha256(cfg.read_bytes()).hexdigest()
        missing = missing_binaries(accounting)
        if missing:
            raise PctkError(f"missing programs: {', '.join(missing)}", APT_HINT)
        if len(str(self.state_dir / "munge" / "munge.socket.2")) > 100:
            raise PctkError(
                f"state folder path is too long for UNIX sockets: {self.state_dir}",
                "use a shorter --state-dir or PCTK_TWIN_DIR",
            )
        with self._lock():
            state = self._load_state()
            self._refuse_other_cluster(state, slurm_cluster_name(topo.name))
            old = self._procs(state)
            if state and old and all(procs.is_running(p) for p in old):
                same = (
                    state.get("config_sha256") == cfg_hash
                    and state.get("nodes_per_resource") == nodes
                    and state.get("accounting") == accounting
                )
                if same:
                    progress("already running")
                    self._set_boot_delay(boot_delay)
                    return self.status()
                progress("the config or --nodes changed: cancelling jobs and restarting "
                         "(state and accounting kept)")
                self._cancel_all_jobs()
            elif old:
                progress("recovering from a previous run that did not stop cleanly")
            if old:
                if state is not None:
                    self._record_drains(state, old)
                procs.stop(power.recorded(self.state_dir))
                procs.stop(old)
                power.forget_all(self.state_dir)
                self._remove_hosts_block()
            self._clean_runtime_files()
            prev_ports = state.get("ports") if state else None
            drains = dict(state.get("drains") or {}) if state else {}
            with _port_lock():
                return self._plan_and_start(topo, cfg, cfg_hash, nodes, accounting, prev_ports,
                                            drains, progress, timeout, boot_delay)

    def _refuse_other_cluster(self, state: dict[str, Any] | None, cluster: str) -> None:
        """One state folder holds one cluster: slurmctld refuses another's StateSaveLocation."""
        held = state.get("cluster") if state else None
        if held and held != cluster:
            raise PctkError(
                f"{self.state_dir} holds the twin of cluster {held}, not {cluster}",
                "use `pctk local up` (a folder per cluster) or another --state-dir")

    def _plan_and_start(self, topo: ClusterTopology, cfg: Path, cfg_hash: str,
                        nodes: int | None, accounting: bool,
                        prev_ports: dict[str, int] | None, drains: dict[str, str],
                        progress: Progress, timeout: float,
                        boot_delay: float = power.DEFAULT_BOOT_DELAY) -> TwinStatus:
        """Choose ports and start the daemons (under the machine-wide port lock)."""
        n_nodes = len(build_plan(topo, self.state_dir, Ports(0, 0, 0, 0),
                                 nodes_per_resource=nodes, accounting=accounting).nodes)
        ports = choose_ports(n_nodes, prefer=prev_ports.get("slurmctld") if prev_ports else None)
        plan = build_plan(topo, self.state_dir, ports, nodes_per_resource=nodes,
                          accounting=accounting)
        started: list[procs.Proc] = []
        record: dict[str, Any] = {
            "version": STATE_VERSION,
            "config": str(cfg),
            "config_sha256": cfg_hash,
            "cluster": plan.cluster_name,
            "nodes_per_resource": nodes,
            "accounting": accounting,
            "ports": {"slurmctld": ports.slurmctld, "slurmdbd": ports.slurmdbd,
                      "mysql": ports.mysql, "slurmd_base": ports.slurmd_base},
            "nodes": [n.name for n in plan.nodes],
            "partitions": [p for p, _ in plan.partitions],
            "procs": [],
            "started": time.time(),
            "drains": drains,
            "notes": list(plan.notes),
            "mounts": mounts.prepare(mount_dirs(topo), self.state_dir),
        }

        def remember(p: procs.Proc) -> None:
            started.append(p)
            record["procs"] = [x.to_json() for x in started]
            atomic_write_json(self.state_file, record)

        try:
            self._start_all(plan, remember, progress, timeout, drains, boot_delay)
        except BaseException:
            progress("start failed: stopping what was started")
            procs.stop(power.recorded(self.state_dir))
            procs.stop(started)
            power.forget_all(self.state_dir)
            self._remove_hosts_block()
            record["procs"] = []
            atomic_write_json(self.state_file, record)
            raise
        for note in plan.notes:
            progress(note)
        return self.status()

    def _clean_runtime_files(self) -> None:
        for rel in ("munge/munge.socket.2", "munge/munge.socket.2.lock", "munge/munged.pid",
                    "ctld/slurmctld.pid", "dbd/slurmdbd.pid"):
            (self.state_dir / rel).unlink(missing_ok=True)
        db = mariadb.layout(self.state_dir)
        db.socket.unlink(missing_ok=True)
        db.pid_file.unlink(missing_ok=True)
        nodes = self.state_dir / "nodes"
        if nodes.is_dir():
            for pid in nodes.glob("*/slurmd.pid"):
                pid.unlink(missing_ok=True)

    def _write_files(self, plan: TwinPlan, db_password: str | None) -> None:
        s = self.state_dir
        for sub in ("etc", "munge", "ctld/state", "dbd", "mysql", "nodes", "log"):
            (s / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(s / "munge", 0o711)
        os.chmod(s / "mysql", 0o700)
        atomic_write_text(plan.slurm_conf, render_slurm_conf(plan), 0o644)
        atomic_write_text(plan.etc / "gres.conf", render_gres_conf(plan), 0o644)
        atomic_write_text(plan.etc / "cgroup.conf", render_cgroup_conf(), 0o644)
        if any(n.addr != "127.0.0.1" for n in plan.nodes):
            lib = nodeaddr.build(s / "lib")
            atomic_write_text(plan.etc / "task_prolog.sh", render_task_prolog(plan, str(lib)),
                              0o755)
        if db_password is not None:
            atomic_write_text(plan.etc / "slurmdbd.conf",
                              render_slurmdbd_conf(plan, db_password), 0o600)
        for n in plan.nodes:
            nd = plan.node_dir(n.name)
            (nd / "spool").mkdir(parents=True, exist_ok=True)
            if n.gpu_count:
                (nd / "dev").mkdir(exist_ok=True)
                for f in plan.gpu_files(n):
                    make_placeholder_device(f)
        key = s / "munge" / "munge.key"
        if not key.exists():
            atomic_write_bytes(key, secrets.token_bytes(1024), 0o400)

    def _daemon_env(self) -> dict[str, str]:
        env = self._cmd_env()
        env["PCTK_TWIN_DAEMON"] = "1"
        return env

    def _start_all(self, plan: TwinPlan, remember: Callable[[procs.Proc], None],
                   progress: Progress, timeout: float, drains: dict[str, str],
                   boot_delay: float = power.DEFAULT_BOOT_DELAY) -> None:
        s = self.state_dir
        db_password = self._db_password() if plan.accounting else None
        self._write_files(plan, db_password)
        env = self._daemon_env()
        power.write_programs(s, plan.slurm_conf, {
            n.name: f"{n.partition}/{n.compute_resource}" for n in plan.nodes}, env, boot_delay,
            addrs={n.name: n.addr for n in plan.nodes})
        # nodes start as slurm.conf says (cloud nodes, powered down) rather than as the last
        # run left them; jobs are kept, and operators' drains are applied again below
        for name in ("node_state", "node_state.old"):
            (s / "ctld" / "state" / name).unlink(missing_ok=True)
        for port in plan.ports.all(len(plan.nodes)):
            if not port_free(port):
                raise PctkError(f"TCP port {port} is in use", "stop what uses it or set "
                                "PCTK_TWIN_PORT_BASE to a free range")
        progress("starting munged")
        munge_log = s / "munge" / "munged.log"
        p = procs.spawn("munged", [
            "munged", "--foreground", "--force",
            f"--socket={plan.munge_socket}", f"--key-file={s}/munge/munge.key",
            f"--pid-file={s}/munge/munged.pid", f"--log-file={munge_log}",
            f"--seed-file={s}/munge/munged.seed", "--num-threads=4",
        ], s / "log" / "munged.out", env, s)
        remember(p)
        self._wait(lambda: plan.munge_socket.exists(), "munged", p, 10, str(munge_log))

        if plan.accounting:
            assert db_password is not None
            self._start_accounting(plan, db_password, env, remember, progress, timeout)

        progress("starting slurmctld")
        ctld_log = s / "ctld" / "slurmctld.log"
        p = procs.spawn("slurmctld", ["slurmctld", "-D", "-f", str(plan.slurm_conf)],
                        s / "log" / "slurmctld.out", env, s)
        remember(p)
        self._wait(lambda: self._run(["scontrol", "ping"]).stdout.find("UP") >= 0,
                   "slurmctld", p, timeout, str(ctld_log))

        self._add_hosts_block(plan)
        static = [n for n in plan.nodes if n.static]
        progress(f"starting {len(static)} slurmd (static nodes; "
                 f"{len(plan.nodes) - len(static)} dynamic nodes are powered down)")
        slurmds = []
        for n in static:
            p = power.start_slurmd(s, n.name, env, plan.slurm_conf)
            remember(p)
            slurmds.append((n, p))

        progress("waiting for nodes to be idle")
        self._wait_nodes_ready(plan, slurmds, drains, timeout, ctld_log)
        self._apply_drains(drains, progress)

        if plan.accounting:
            progress("waiting for sacct")
            self._wait(lambda: self._run(["sacct", "-n", "-X", "-o", "JobID"]).returncode == 0,
                       "sacct", None, timeout, str(s / "dbd" / "slurmdbd.log"))

    def _wait_nodes_ready(self, plan: TwinPlan, slurmds: list[tuple[Any, procs.Proc]],
                          drains: dict[str, str], timeout: float, ctld_log: Path) -> None:
        """Every node up; an operator's drained node may stay drained (it is kept)."""
        deadline = time.monotonic() + timeout
        names = {n.name for n, _ in slurmds}
        dynamic = {n.name for n in plan.nodes if not n.static}
        while True:
            states = self._node_states()
            bad = [name for name, st in states.items()
                   if not _node_ready(st, kept_drained=name in drains, dynamic=name in dynamic)]
            if states and not bad and len(states) == len(plan.nodes):
                return
            for n, p in slurmds:
                if not procs.is_running(p):
                    log = plan.node_dir(n.name) / "slurmd.log"
                    raise PctkError(
                        f"slurmd for {n.name} exited: {procs.tail(log, 2) or procs.tail(p.log, 2)}",
                        "read the log", log=str(log))
            if time.monotonic() > deadline:
                raise PctkError(
                    f"nodes not idle after {timeout:.0f}s: "
                    + ", ".join(f"{k}={states.get(k)}" for k in bad[:5]),
                    "read the slurmctld log", log=str(ctld_log))
            # a node left DOWN (or drained by the twin itself) by a previous run
            for name in bad:
                st = states.get(name, "")
                if name in drains and st.startswith("drain"):
                    continue  # an operator's drain: wait for its slurmd, keep the drain
                if st.startswith(("down", "drain")) and name in names:
                    self._run(["scontrol", "update", f"NodeName={name}", "State=RESUME"])
            time.sleep(0.25)

    def _apply_drains(self, drains: dict[str, str], progress: Progress) -> None:
        """Drain again what an operator had drained before the twin stopped."""
        states = self._node_states()
        for name, reason in sorted(drains.items()):
            if name not in states or states[name].startswith("drain"):
                continue
            progress(f"keeping {name} drained: {reason}")
            self._run(["scontrol", "update", f"NodeName={name}", "State=DRAIN",
                       f"Reason={reason}"])

    def _record_drains(self, state: dict[str, Any], running: list[procs.Proc]) -> None:
        """Remember drained nodes and reasons while slurmctld still answers."""
        if not any(p.name == "slurmctld" and procs.is_running(p) for p in running):
            return
        r = self._run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"])
        if r.returncode != 0:
            return
        drains: dict[str, str] = {}
        for line in r.stdout.splitlines():
            name, st, reason = [*line.split("|", 2), "", ""][:3]
            if "drain" in st.lower():
                drains[name] = reason.strip() or "drained before the twin stopped"
        state["drains"] = drains

    def _db_password(self) -> str:
        pw_file = self.state_dir / "mysql" / "slurm.password"
        if pw_file.exists():
            return pw_file.read_text().strip()
        pw = secrets.token_hex(16)
        atomic_write_text(pw_file, pw + "\n", 0o600)
        return pw

    def _start_accounting(self, plan: TwinPlan, db_password: str, env: dict[str, str],
                          remember: Callable[[procs.Proc], None], progress: Progress,
                          timeout: float) -> None:
        s = self.state_dir
        db = mariadb.layout(s)
        mariadb.prepare(db)
        if not mariadb.initialised(db):
            progress("initialising MariaDB data folder")
            mariadb.install(db, env, s)
        progress("starting MariaDB")
        p = procs.spawn("mariadbd", mariadb.server_argv(db, plan.ports.mysql),
                        s / "log" / "mariadbd.out", env, s)
        remember(p)
        setup = mariadb.client_argv(db, mariadb.setup_sql(db_password))
        self._wait(lambda: subprocess.run(setup, capture_output=True, env=env).returncode == 0,
                   "mariadbd", p, timeout, str(db.log))
        progress("starting slurmdbd")
        dbd_log = s / "dbd" / "slurmdbd.log"
        p = procs.spawn("slurmdbd", ["slurmdbd", "-D"], s / "log" / "slurmdbd.out", env, s)
        remember(p)

        def cluster_registered() -> bool:
            r = self._run(["sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster"])
            if r.returncode != 0:
                return False
            if plan.cluster_name in r.stdout.split():
                return True
            self._run(["sacctmgr", "-i", "add", "cluster", plan.cluster_name])
            return False

        self._wait(cluster_registered, "slurmdbd", p, timeout, str(dbd_log))

    def _wait(self, ready: Callable[[], bool], what: str, proc: procs.Proc | None,
              timeout: float, log: str) -> None:
        deadline = time.monotonic() + timeout
        delay = 0.05
        while not ready():
            if proc is not None and not procs.is_running(proc):
                detail = procs.tail(log, 2) or procs.tail(proc.log, 2)
                raise PctkError(f"{what} exited during start-up: {detail}",
                                "read the log", log=log)
            if time.monotonic() > deadline:
                raise PctkError(f"{what} not ready after {timeout:.0f}s", "read the log", log=log)
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _run(self, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(argv, capture_output=True, text=True, env=self._cmd_env(),
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", "timed out")
        except FileNotFoundError:
            return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: not found")

    def _node_states(self) -> dict[str, str]:
        r = self._run(["sinfo", "-h", "-N", "-o", "%N %T"])
        out: dict[str, str] = {}
        if r.returncode == 0:
            for line in r.stdout.splitlines():
                parts = line.split()
                if len(parts) == 2:
                    out[parts[0]] = parts[1].lower()
        return out

    # ---------------------------------------------------------------- hosts
    def _hosts_markers(self) -> tuple[str, str]:
        return (f"# BEGIN pctk twin {self.state_dir}", f"# END pctk twin {self.state_dir}")

    def _add_hosts_block(self, plan: TwinPlan) -> None:
        """Node names and host names resolve to the nodes' addresses (see plan.node_host).

        MASTER_ADDR from the node list works; the host names must be written before the
        slurmd resolve them at start.
        """
        begin, end = self._hosts_markers()
        names = [(n.addr, n.name) for n in plan.nodes if n.addr == "127.0.0.1"]
        block = [begin] + [
            "127.0.0.1 " + " ".join(name for _, name in names[i: i + 8])
            for i in range(0, len(names), 8)
        ] + [f"{n.addr} {n.host} {n.name}" for n in plan.nodes if n.addr != "127.0.0.1"] + [end]
        self._edit_hosts(lambda lines: self._strip_block(lines) + block)

    def _remove_hosts_block(self) -> None:
        self._edit_hosts(self._strip_block)

    def _strip_block(self, lines: list[str]) -> list[str]:
        begin, end = self._hosts_markers()
        out, skipping = [], False
        for line in lines:
            if line == begin:
                skipping = True
            elif line == end and skipping:
                skipping = False
            elif not skipping:
                out.append(line)
        return out

    def _edit_hosts(self, change: Callable[[list[str]], list[str]]) -> None:
        try:
            with open(HOSTS_FILE, "r+") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                lines = fh.read().splitlines()
                new = change(lines)
                if new != lines:
                    # /etc/hosts is often a bind mount: rewrite in place, not by rename
                    fh.seek(0)
                    fh.write("\n".join(new) + "\n")
                    fh.truncate()
        except PermissionError:
            pass  # not root: names do not resolve; MASTER_ADDR=127.0.0.1 still works
        except FileNotFoundError:
            pass

    # ---------------------------------------------------------------- power
    def power_up(self, nodes: list[str], timeout: float = 90) -> None:
        """Power dynamic nodes up now (as a job would) and wait until they are idle."""
        from toolkit.submit.slurm import node_states, update_nodes

        if not nodes:
            return
        r = update_nodes(nodes, env=self._cmd_env(), State="POWER_UP")
        if r.returncode != 0:
            raise PctkError(f"could not power up {','.join(nodes)}: {r.stderr.strip()}")
        deadline = time.monotonic() + timeout
        while True:
            states = node_states(env=self._cmd_env())
            if all(states.get(n, ("", ""))[0] in ("idle", "mixed", "allocated") for n in nodes):
                return
            if time.monotonic() > deadline:
                raise PctkError(f"nodes not powered up after {timeout:.0f}s: "
                                + ", ".join(f"{n}={states.get(n, ('?', ''))[0]}" for n in nodes),
                                "read power/events.jsonl in the twin's folder")
            time.sleep(0.3)

    # ---------------------------------------------------------------- down
    def down(self, progress: Progress = _quiet, purge: bool = False) -> list[str]:
        """Stop every process ``up`` started; returns the names of those that were running."""
        with self._lock():
            state = self._load_state()
            ps = self._procs(state)
            running = [p for p in ps if procs.is_running(p)]
            for kind in faults.clear(self.state_dir):
                progress(f"cleared the {kind} fault")
            from toolkit.observe import stack  # Prometheus & co. started for this twin

            running_obs = stack.stop(self.state_dir, progress)
            ctld = [p for p in running if p.name == "slurmctld"]
            if ctld and state is not None:
                self._record_drains(state, running)
            if ctld:
                progress("cancelling jobs")
                self._cancel_all_jobs()
            extra = [p for p in power.recorded(self.state_dir) if procs.is_running(p)]
            if extra:
                # boot processes first (a slurmd they would start), then powered-up nodes
                progress(f"stopping {len(extra)} powered-up node(s) and boot processes")
                procs.stop([p for p in extra if p.name.startswith("power:")])
                procs.stop([p for p in extra if not p.name.startswith("power:")])
            power.forget_all(self.state_dir)
            order = ["slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"]
            for group in order:
                members = [p for p in running if p.name.split(":")[0] == group]
                if members:
                    count = f" x{len(members)}" if len(members) > 1 else ""
                    progress(f"stopping {group}{count}")
                    left = procs.stop(members)
                    if left:
                        raise PctkError(
                            f"could not stop {', '.join(f'{p.name} (pid {p.pid})' for p in left)}",
                            "check the process and its log", log=left[0].log)
            self._remove_hosts_block()
            if state is not None:
                state["procs"] = []
                state["stopped"] = time.time()
                atomic_write_json(self.state_file, state)
        if purge:
            if state is not None:
                for path in mounts.release(list(state.get("mounts") or []), self.state_dir):
                    progress(f"removed the stand-in {path}")
            mariadb.purge(mariadb.layout(self.state_dir))
            self._remove_state_folder()
        return [*running_obs, *(p.name for p in running)]

    def _remove_state_folder(self) -> None:
        """Delete this twin's state; other clusters' twins kept inside (an old root) stay."""
        if not self.state_dir.is_dir():
            return
        nested = {p for p in self.state_dir.iterdir() if (p / "twin.json").is_file()}
        if not nested:
            shutil.rmtree(self.state_dir, ignore_errors=True)
            return
        for p in self.state_dir.iterdir():
            if p in nested:
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)

    def _cancel_all_jobs(self, timeout: float = 20) -> None:
        r = self._run(["squeue", "-h", "-o", "%A"])
        ids = [x for x in r.stdout.split() if x.isdigit()] if r.returncode == 0 else []
        if not ids:
            return
        self._run(["scancel", *ids])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self._run(["squeue", "-h", "-o", "%A"])
            if r.returncode != 0 or not r.stdout.strip():
                return
            time.sleep(0.3)

    # ---------------------------------------------------------------- status
    def status(self) -> TwinStatus:
        state = self._load_state()
        ps = self._procs(state)
        daemons = [
            {"name": p.name, "pid": p.pid, "running": procs.is_running(p), "log": p.log}
            for p in ps
        ]
        running = bool(ps) and all(d["running"] for d in daemons)
        ctld_up = any(d["name"] == "slurmctld" and d["running"] for d in daemons)
        nodes: list[dict[str, str]] = []
        if ctld_up:
            r = self._run(["sinfo", "-h", "-N", "-o", "%N|%P|%T|%c|%G|%E"])
            for line in r.stdout.splitlines():
                name, part, st, cpus, gres, reason = (line.split("|") + [""] * 6)[:6]
                nodes.append({"name": name, "partition": part.rstrip("*"), "state": st,
                              "cpus": cpus, "gres": gres, "reason": reason})
        return TwinStatus(
            state_dir=self.state_dir,
            running=running,
            config=state.get("config") if state else None,
            cluster=state.get("cluster") if state else None,
            daemons=daemons,
            nodes=nodes,
            partitions=list(state.get("partitions", [])) if state else [],
            accounting=bool(state.get("accounting")) if state else False,
            notes=[n for n in state.get("notes") or [] if n.startswith("capped")] if state else [],
            mounts=list(state.get("mounts") or []) if state else [],
            power_events=power.events(self.state_dir, limit=10) if state else [],
            faults=_faults(self.state_dir),
        )
