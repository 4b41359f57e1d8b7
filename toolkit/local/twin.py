"""The local twin: start, inspect and stop a real Slurm cluster on this machine.

``Twin(state_dir).up(config)`` plans the twin (:mod:`toolkit.local.plan`), writes its files
(:mod:`toolkit.local.files`), then starts the daemons of :meth:`Twin.daemons` one after the
other, each waited for by its readiness probe: munged, MariaDB + slurmdbd (accounting, on by
default), slurmctld. Then one slurmd per static node; it returns when those nodes are idle,
the dynamic ones powered down (``idle~``, powered up on demand by :mod:`toolkit.local.power`)
and ``sacct`` answers. Every daemon runs in the foreground of its own session; its pid and
start time go into ``twin.json`` (:mod:`toolkit.local.state`; a node's slurmd also into
``nodes/<node>/slurmd.json``) so ``down`` stops exactly those processes. Slurm's commands
are run through :mod:`toolkit.slurm`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit import slurm
from toolkit.config.model import ClusterTopology, load_topology
from toolkit.errors import PctkError
from toolkit.local import (
    faultfile,
    faults,
    files,
    hosts,
    mariadb,
    mounts,
    power,
    precheck,
    procs,
    slurmimage,
    stack,
    state,
    stopsignals,
)
from toolkit.local.plan import (
    Ports,
    TwinPlan,
    build_plan,
    choose_ports,
    first_job_id,
    mount_dirs,
    port_base,
    port_free,
    port_lock,
    slurm_cluster_name,
)
from toolkit.local.state import TwinState
from toolkit.paths import resolve_config, twin_dir

# said by `local up` (and kept in the twin's notes) when the config has no Database
NO_DATABASE_NOTE = (
    "accounting off: the config has no Scheduling/SlurmSettings/Database, so, as on its "
    "cluster, sacct, job history and accounting-based job states are unavailable "
    "(`pctk local up --accounting` turns them on)")
# the notes `local status` shows again (a forced start, what no accounting loses, caps)
SHOWN_NOTES = ("capped", "WARNING", "accounting off")
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
    # daemons a running twin has that were never started (an `up` killed half-way)
    missing: list[str] = dataclasses.field(default_factory=list)
    mounts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # the power programs' latest steps (power-up, slurmd started, power-down, capacity faults)
    power_events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # faults.json: slow-net/slow-cpu (faults.py) and armed capacity faults (capacity.py)
    faults: dict[str, Any] = dataclasses.field(default_factory=dict)
    # the Slurm the daemons run ("24.11.5"), and the built image's prefix (None: the system's)
    slurm_version: str | None = None
    slurm_prefix: str | None = None

    @property
    def state(self) -> str:
        """running (every daemon up), degraded (some died) or stopped (none up)."""
        if self.running:
            return "running"
        return "degraded" if any(d["running"] for d in self.daemons) else "stopped"

    @property
    def dead_daemons(self) -> list[str]:
        """Daemons that died or never started while others run (empty unless degraded)."""
        if self.state != "degraded":
            return []
        return [d["name"] for d in self.daemons if not d["running"]] + self.missing

    def to_json(self) -> dict[str, Any]:
        return {
            "state_dir": str(self.state_dir),
            "state": self.state,
            "dead_daemons": self.dead_daemons,
            "missing": self.missing,
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
            "slurm": {"version": self.slurm_version, "prefix": self.slurm_prefix},
        }


def _node_ready(state: str, kept_drained: bool, dynamic: bool = False) -> bool:
    if state in ("idle", "mixed", "allocated"):
        return True
    if dynamic and state == "idle~":
        return True  # powered down until a job needs it, as on ParallelCluster
    base = state.rstrip("~#%!")
    return kept_drained and base in ("drained", "draining", "drain")


def _faults(state_dir: Path) -> dict[str, Any]:
    """faults.json as armed by `pctk local fault` (empty when none)."""
    return {k: v for k, v in faultfile.read(state_dir).items() if v}


def _release(st: TwinState) -> str:
    """TwinPlan.slurm_release of a recorded twin: a built release's series, "" the system's."""
    return slurmimage.series_of(st.slurm_version) if st.slurm_prefix and st.slurm_version \
        else ""


def missing_binaries(accounting: bool, image: slurmimage.Image | None = None) -> list[str]:
    names = SLURM_BINARIES + ("munged",) + (ACCOUNTING_BINARIES if accounting else ())
    path = slurmimage.path_with(image)
    return [n for n in names if shutil.which(n, path=path) is None]


@dataclass(frozen=True)
class Daemon:
    """One row of the start table: what to run, where it logs, and when it is ready."""

    name: str
    argv: list[str]
    log: Path  # the daemon's own log, shown when it dies or is not ready in time
    ready: Callable[[], bool]
    timeout: float
    before: Callable[[], None] | None = None  # preparation (e.g. MariaDB's data folder)
    title: str = ""  # how progress names it, when not by its program's name


class Twin:
    """A local Slurm cluster rooted at one state folder."""

    def __init__(self, state_dir: str | os.PathLike[str] | None = None,
                 root: str | os.PathLike[str] | None = None):
        if state_dir is None:
            # no folder named: the twin meant under the twin root (running, else last started)
            root = Path(root) if root else twin_dir()
            state_dir = state.select(root.absolute())
        self.state_dir: Path = Path(state_dir).absolute()
        self.state_file = state.state_file(self.state_dir)
        # the folder of all twins (one per cluster) this one belongs to; see toolkit.local.clusters
        self.root: Path = Path(root).absolute() if root else self.state_dir
        # up() sets the Slurm prefix it starts (None: the system's); False: as recorded
        self._prefix: str | bool | None = False

    # ---------------------------------------------------------------- state
    def _load_state(self) -> TwinState | None:
        return state.load(self.state_dir)

    def _procs(self, st: TwinState | None) -> list[procs.Proc]:
        return state.live_procs(self.state_dir, st)

    @property
    def slurm_conf(self) -> Path:
        return state.slurm_conf(self.state_dir)

    def env(self) -> dict[str, str]:
        """Variables that point Slurm's commands (and submitit) at this twin (PATH too when
        it runs a built Slurm: toolkit.local.slurmimage)."""
        if self._prefix is not False:  # inside up(): the release being started
            return state.env(self.state_dir, self.root, self._prefix)
        return state.env(self.state_dir, self.root)

    def _cmd_env(self) -> dict[str, str]:
        return {**os.environ, **self.env()}

    def _daemon_env(self) -> dict[str, str]:
        return {**self._cmd_env(), "PCTK_TWIN_DAEMON": "1"}

    def any_daemon_up(self) -> bool:
        """Running or degraded: some process `up` started is still alive (no Slurm query)."""
        return state.any_daemon_up(self.state_dir)

    def is_running(self) -> bool:
        st = self._load_state()
        ps = self._procs(st)
        return (bool(ps) and not state.missing_daemons(st)
                and all(procs.is_running(p) for p in ps))

    # ---------------------------------------------------------------- up
    def up(
        self,
        config: str | os.PathLike[str] | None = None,
        *,
        nodes: int | None = None,
        accounting: bool | None = None,
        progress: Progress = _quiet,
        timeout: float = 90.0,
        boot_delay: float = power.DEFAULT_BOOT_DELAY,
        force: bool = False,
        check: bool = True,
        slurm_release: str | None = None,
    ) -> TwinStatus:
        """Start (or restart) the twin of ``config``.

        ``accounting`` None follows the config (SlurmSettings/Database); ``force`` starts a
        config that ``pctk config check`` rejects; ``check`` False when the caller ran it;
        ``slurm_release`` the Slurm to run (toolkit.local.slurmimage.choose: ``system``, a
        built release such as ``24.11``, None for the default).
        """
        if boot_delay < 0:
            raise PctkError(f"--boot-delay must be 0 or more seconds (got {boot_delay:g})")
        first_job_id(slurm_release or "")  # a bad PCTK_TWIN_FIRST_JOB_ID: before any change
        cfg = resolve_config(config)
        # before anything is stopped: a config ParallelCluster would refuse is refused here
        notes = precheck.check_before_start(cfg, force=force, progress=progress) if check else []
        topo = load_topology(cfg)
        if accounting is None:
            accounting = topo.accounting
            if not accounting:
                notes.append(NO_DATABASE_NOTE)
                progress(NO_DATABASE_NOTE)
        # a PCTK_TWIN_PORT_BASE that leaves no room for this twin's ports, before any change
        port_base(len(build_plan(topo, self.state_dir, Ports(0, 0, 0, 0),
                                 nodes_per_resource=nodes, accounting=accounting).nodes))
        cfg_hash = hashlib.sha256(cfg.read_bytes()).hexdigest()
        # built (once) before anything is stopped: a failed build leaves a running twin be
        with stopsignals.as_exceptions():  # SIGTERM during a build stops its compilers too
            image = slurmimage.choose(slurm_release, progress)
        prefix = str(image.prefix) if image else None
        self._prefix = prefix
        try:
            return self._start(topo, cfg, cfg_hash, nodes, accounting, progress, timeout,
                               boot_delay, notes, image, prefix)
        finally:
            self._prefix = False  # from here on env() follows what twin.json records

    def _start(self, topo: ClusterTopology, cfg: Path, cfg_hash: str, nodes: int | None,
               accounting: bool, progress: Progress, timeout: float, boot_delay: float,
               notes: list[str], image: slurmimage.Image | None, prefix: str | None
               ) -> TwinStatus:
        """``up`` once the config is read and the release chosen (``self._prefix`` set)."""
        missing = missing_binaries(accounting, image)
        if missing:
            raise PctkError(f"missing programs: {', '.join(missing)}", APT_HINT)
        if len(str(self.state_dir / "munge" / "munge.socket.2")) > 100:
            raise PctkError(
                f"state folder path is too long for UNIX sockets: {self.state_dir}",
                "use a shorter --state-dir or PCTK_TWIN_DIR",
            )
        with stopsignals.as_exceptions(), state.lock(self.state_dir):
            st = self._load_state()
            self._refuse_other_cluster(st, slurm_cluster_name(topo.name))
            old = self._procs(st)
            if st and old and not state.missing_daemons(st) \
                    and all(procs.is_running(p) for p in old):
                same = (st.config_sha256 == cfg_hash and st.nodes_per_resource == nodes
                        and st.accounting == accounting and st.slurm_prefix == prefix)
                if same:
                    progress("already running")
                    power.set_boot_delay(self.state_dir, boot_delay)
                    return self.status()
                progress("the config, --nodes or --slurm changed: cancelling jobs and "
                         "restarting (state and accounting kept)")
                self._prefix = st.slurm_prefix  # the running release's scancel
                self._cancel_all_jobs()
            elif old:
                if st is not None and st.slurm_prefix == prefix \
                        and self._restartable_in_place(st, old, cfg_hash, nodes, accounting):
                    try:
                        return self._restart_in_place(topo, st, old, progress, timeout)
                    except PctkError as exc:
                        progress(f"restarting in place failed ({exc}); restarting the twin")
                        st = self._load_state() or st
                        old = self._procs(st)
                progress("recovering from a previous run that did not stop cleanly")
            if old:
                if st is not None:
                    # the running release's scontrol: a client two releases apart is refused
                    self._prefix = st.slurm_prefix
                    try:
                        self._record_drains(st, old)
                    finally:
                        self._prefix = prefix
                procs.stop(power.recorded(self.state_dir))
                procs.stop(old)
                power.forget_all(self.state_dir)
                hosts.remove_block(self.state_dir)
            files.clean_runtime_files(self.state_dir)
            if st is not None and st.slurm_version and st.slurm_prefix != prefix:
                # another release's slurmd left its job state in the nodes' spools
                files.clean_spools(self.state_dir)
            prev_ports = st.ports if st else None
            drains = dict(st.drains) if st else {}
            with port_lock():
                return self._plan_and_start(topo, cfg, cfg_hash, nodes, accounting, prev_ports,
                                            drains, progress, timeout, boot_delay, notes, image)

    def _restartable_in_place(self, st: TwinState, old: list[procs.Proc], cfg_hash: str,
                              nodes: int | None, accounting: bool) -> bool:
        """Only slurmctld and/or slurmd died, with the config unchanged: restart just those.

        A head node whose slurmctld crashed keeps its slurmd and their jobs running; the
        controller recovers its jobs, nodes and drains from StateSaveLocation when it starts
        again (no -c). The twin does the same instead of stopping every daemon, starting
        every slurmd afresh and discarding the saved node state under the recovered jobs.
        """
        dead = [p for p in old if not procs.is_running(p)]
        return (bool(dead) and not state.missing_daemons(st)
                and st.config_sha256 == cfg_hash and st.nodes_per_resource == nodes
                and st.accounting == accounting and st.ports is not None
                and all(p.name == "slurmctld" or p.name.startswith("slurmd:") for p in dead)
                and (procs.is_running(next(p for p in old if p.name == "slurmctld"))
                     or port_free(st.ports.slurmctld)))

    def _restart_in_place(self, topo: ClusterTopology, st: TwinState, old: list[procs.Proc],
                          progress: Progress, timeout: float) -> TwinStatus:
        """Start the dead slurmctld and slurmd again on the files, state and ports they had."""
        s = self.state_dir
        env, cmd_env = self._daemon_env(), self._cmd_env()
        ctld_log = s / "ctld" / "slurmctld.log"
        dead = [p for p in old if not procs.is_running(p)]
        assert st.ports is not None
        plan = build_plan(topo, s, st.ports, nodes_per_resource=st.nodes_per_resource,
                          accounting=st.accounting, slurm_release=_release(st))

        def replace(new: procs.Proc) -> None:
            st.procs = [new if p.name == new.name else p for p in st.procs]
            state.save(s, st)

        if any(p.name == "slurmctld" for p in dead):
            progress("slurmctld is down: starting it again (running jobs, nodes and saved "
                     "state kept)")
            with stopsignals.deferred():
                ctld = procs.spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.slurm_conf)],
                                   s / "log" / "slurmctld.out", env, s)
                replace(ctld)
            self._wait(lambda: slurm.ping(env=cmd_env), "slurmctld", ctld, timeout,
                       str(ctld_log))
        by_name = {n.name: n for n in plan.nodes}
        restart = [p.name.split(":", 1)[1] for p in dead if p.name.startswith("slurmd:")]
        # a controller killed before it saved a static node's registration recovers it as
        # powered down (idle~); its slurmd registers only when it starts, so start it again
        # (a powered-down node runs no job)
        states = self._node_states()
        asleep = [n.name for n in plan.nodes if n.static and n.name not in restart
                  and states.get(n.name, "").endswith("~")]
        for node in asleep:
            power.stop_slurmd(s, node)
        for node in [*restart, *asleep]:
            if node not in by_name:
                continue
            progress(f"slurmd of {node} is down: starting it again" if node in restart
                     else f"{node} was recovered powered down: starting its slurmd again")
            with stopsignals.deferred():
                replace(power.start_slurmd(s, node, env, plan.slurm_conf))
        running = {p.name: p for p in self._procs(st)}
        slurmds = [(n, running[f"slurmd:{n.name}"]) for n in plan.nodes
                   if f"slurmd:{n.name}" in running]
        progress("waiting for nodes to be idle")
        self._wait_nodes_ready(plan, slurmds, st.drains, timeout, ctld_log)
        if st.accounting:
            self._wait(lambda: slurm.sacct_answers(env=cmd_env), "sacct", None, timeout,
                       str(s / "dbd" / "slurmdbd.log"))
        return self.status()

    def _refuse_other_cluster(self, st: TwinState | None, cluster: str) -> None:
        """One state folder holds one cluster: slurmctld refuses another's StateSaveLocation."""
        held = st.cluster if st else None
        if held and held != cluster:
            raise PctkError(
                f"{self.state_dir} holds the twin of cluster {held}, not {cluster}",
                "use `pctk local up` (a folder per cluster) or another --state-dir")

    def _plan_and_start(self, topo: ClusterTopology, cfg: Path, cfg_hash: str,
                        nodes: int | None, accounting: bool, prev_ports: Ports | None,
                        drains: dict[str, str], progress: Progress, timeout: float,
                        boot_delay: float = power.DEFAULT_BOOT_DELAY,
                        notes: list[str] | None = None,
                        image: slurmimage.Image | None = None) -> TwinStatus:
        """Choose ports and start the daemons (under the machine-wide port lock)."""
        release = image.series if image else ""
        n_nodes = len(build_plan(topo, self.state_dir, Ports(0, 0, 0, 0),
                                 nodes_per_resource=nodes, accounting=accounting).nodes)
        ports = choose_ports(n_nodes, prefer=prev_ports.slurmctld if prev_ports else None)
        plan = build_plan(topo, self.state_dir, ports, nodes_per_resource=nodes,
                          accounting=accounting, slurm_release=release,
                          first_job_id=first_job_id(release))
        record = TwinState(
            config=str(cfg),
            config_sha256=cfg_hash,
            cluster=plan.cluster_name,
            nodes_per_resource=nodes,
            accounting=accounting,
            ports=ports,
            nodes=[n.name for n in plan.nodes],
            partitions=[p for p, _ in plan.partitions],
            started=time.time(),
            drains=drains,
            notes=[*(notes or []), *plan.notes],
            mounts=mounts.prepare(mount_dirs(topo), self.state_dir),
            slurm_version=image.version if image else slurmimage.system_version(),
            slurm_prefix=str(image.prefix) if image else None,
        )

        def remember(p: procs.Proc) -> None:
            record.procs.append(p)
            state.save(self.state_dir, record)

        try:
            self._start_all(plan, remember, progress, timeout, drains, boot_delay)
        except BaseException:
            # Ctrl-C, SIGTERM or SIGHUP (toolkit.local.stopsignals) too; a closed terminal
            # must not keep the daemons from being stopped
            with contextlib.suppress(Exception):
                progress("start failed: stopping what was started")
            procs.stop(power.recorded(self.state_dir))
            procs.stop(record.procs)
            power.forget_all(self.state_dir)
            hosts.remove_block(self.state_dir)
            record.procs = []
            state.save(self.state_dir, record)
            raise
        for note in plan.notes:
            progress(note)
        return self.status()

    def daemons(self, plan: TwinPlan, db_password: str | None, *, timeout: float,
                progress: Progress = _quiet) -> list[Daemon]:
        """The start table: every daemon but the slurmd, in start order."""
        s = self.state_dir
        env, daemon_env = self._cmd_env(), self._daemon_env()
        munge_log = s / "munge" / "munged.log"
        table = [Daemon(
            "munged",
            ["munged", "--foreground", "--force", f"--socket={plan.munge_socket}",
             f"--key-file={s}/munge/munge.key", f"--pid-file={s}/munge/munged.pid",
             f"--log-file={munge_log}", f"--seed-file={s}/munge/munged.seed",
             "--num-threads=4"],
            munge_log, plan.munge_socket.exists, timeout=10)]
        if db_password is not None:
            db = mariadb.layout(s)

            def cluster_registered() -> bool:
                known = slurm.sacctmgr_clusters(env=env)
                if known is None:
                    return False
                if plan.cluster_name in known:
                    return True
                slurm.sacctmgr_add_cluster(plan.cluster_name, env=env)
                return False

            def prepare_database() -> None:
                mariadb.prepare(db)
                if not mariadb.initialised(db):
                    progress("initialising MariaDB data folder")
                    mariadb.install(db, daemon_env, s)

            password = db_password
            table += [
                Daemon("mariadbd", mariadb.server_argv(db, plan.ports.mysql), db.log,
                       lambda: mariadb.setup(db, password, daemon_env, plan.accounting_db),
                       timeout,
                       before=prepare_database, title="MariaDB"),
                Daemon("slurmdbd", ["slurmdbd", "-D"], s / "dbd" / "slurmdbd.log",
                       cluster_registered, timeout),
            ]
        table.append(Daemon("slurmctld", ["slurmctld", "-D", "-f", str(plan.slurm_conf)],
                            s / "ctld" / "slurmctld.log", lambda: slurm.ping(env=env), timeout))
        return table

    def _start_all(self, plan: TwinPlan, remember: Callable[[procs.Proc], None],
                   progress: Progress, timeout: float, drains: dict[str, str],
                   boot_delay: float = power.DEFAULT_BOOT_DELAY) -> None:
        """Files, then the start table, then the static nodes' slurmd; wait for all."""
        s = self.state_dir
        env = self._daemon_env()
        db_password = mariadb.password(s) if plan.accounting else None
        self._write_files(plan, db_password, env, boot_delay)

        for d in self.daemons(plan, db_password, timeout=timeout, progress=progress):
            if d.before:
                d.before()
            progress(f"starting {d.title or d.name}")
            with stopsignals.deferred():  # its pid recorded before a signal stops up
                p = procs.spawn(d.name, d.argv, s / "log" / f"{d.name}.out", env, s)
                remember(p)
            self._wait(d.ready, d.name, p, d.timeout, str(d.log))

        hosts.add_block(s, plan.nodes)
        static = [n for n in plan.nodes if n.static]
        progress(f"starting {len(static)} slurmd (static nodes; "
                 f"{len(plan.nodes) - len(static)} dynamic nodes are powered down)")
        slurmds = []
        for n in static:
            with stopsignals.deferred():
                p = power.start_slurmd(s, n.name, env, plan.slurm_conf)
                remember(p)
            slurmds.append((n, p))

        progress("waiting for nodes to be idle")
        self._wait_nodes_ready(plan, slurmds, drains, timeout, s / "ctld" / "slurmctld.log")
        self._apply_drains(drains, progress)

        if plan.accounting:
            progress("waiting for sacct")
            cmd_env = self._cmd_env()
            self._wait(lambda: slurm.sacct_answers(env=cmd_env), "sacct", None, timeout,
                       str(s / "dbd" / "slurmdbd.log"))

    def _write_files(self, plan: TwinPlan, db_password: str | None, env: dict[str, str],
                     boot_delay: float) -> None:
        """Configuration, power programs, a fresh node state; and every port still free."""
        s = self.state_dir
        files.write_files(plan, db_password)
        power.write_programs(s, plan.slurm_conf, {
            n.name: f"{n.partition}/{n.compute_resource}" for n in plan.nodes}, env, boot_delay,
            addrs={n.name: n.addr for n in plan.nodes})
        # nodes start as slurm.conf says (cloud nodes, powered down) rather than as the last
        # run left them; jobs are kept, and operators' drains are applied again below
        for name in ("node_state", "node_state.old"):
            (plan.ctld_state / name).unlink(missing_ok=True)
        for port in plan.ports.all(len(plan.nodes)):
            if not port_free(port):
                raise PctkError(f"TCP port {port} is in use", "stop what uses it or set "
                                "PCTK_TWIN_PORT_BASE to a free range")

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
                    slurm.update_nodes([name], env=self._cmd_env(), State="RESUME")
            time.sleep(0.25)

    def _node_states(self) -> dict[str, str]:
        return {n: st for n, (st, _) in slurm.node_states(env=self._cmd_env()).items()}

    def _apply_drains(self, drains: dict[str, str], progress: Progress) -> None:
        """Drain again what an operator had drained before the twin stopped."""
        states = self._node_states()
        for name, reason in sorted(drains.items()):
            if name not in states or states[name].startswith("drain"):
                continue
            progress(f"keeping {name} drained: {reason}")
            slurm.update_nodes([name], env=self._cmd_env(), State="DRAIN", Reason=reason)

    def _record_drains(self, st: TwinState, running: list[procs.Proc]) -> None:
        """Remember drained nodes and reasons while slurmctld still answers."""
        if not any(p.name == "slurmctld" and procs.is_running(p) for p in running):
            return
        nodes = slurm.node_states(env=self._cmd_env())
        if not nodes:
            return  # no answer: keep what was recorded
        st.drains = {name: reason.strip() or "drained before the twin stopped"
                     for name, (node_state, reason) in nodes.items() if "drain" in node_state}

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

    # ---------------------------------------------------------------- power
    def power_up(self, nodes: list[str], timeout: float = 90) -> None:
        """Power dynamic nodes up now (as a job would) and wait until they are idle."""
        if not nodes:
            return
        r = slurm.update_nodes(nodes, env=self._cmd_env(), State="POWER_UP")
        if r.returncode != 0:
            raise PctkError(f"could not power up {','.join(nodes)}: {slurm.error_line(r)}")
        deadline = time.monotonic() + timeout
        while True:
            states = slurm.node_states(env=self._cmd_env())
            if all(states.get(n, ("", ""))[0] in ("idle", "mixed", "allocated") for n in nodes):
                return
            if time.monotonic() > deadline:
                raise PctkError(f"nodes not powered up after {timeout:.0f}s: "
                                + ", ".join(f"{n}={states.get(n, ('?', ''))[0]}" for n in nodes),
                                "read power/events.jsonl in the twin's folder")
            time.sleep(0.3)

    # ---------------------------------------------------------------- down
    def down(self, progress: Progress = _quiet, purge: bool = False) -> list[str]:
        """Stop every process ``up`` started; returns the names of those that were running.

        ``purge`` also deletes the twin's folder, and only a folder that holds a twin.json of
        this user's: anything else under that name is refused before anything is stopped.
        """
        if not self.state_dir.is_dir() and not self.state_dir.is_symlink():
            return []  # no twin was ever here: nothing to stop, and no folder made for nothing
        if purge:
            self.check_removable()
        with state.lock(self.state_dir):
            st = self._load_state()
            ps = self._procs(st)
            running = [p for p in ps if procs.is_running(p)]
            for kind in faults.clear(self.state_dir):
                progress(f"cleared the {kind} fault")
            running_obs = stack.stop(self.state_dir, progress)  # Prometheus & co. of this twin
            ctld = [p for p in running if p.name == "slurmctld"]
            if ctld and st is not None:
                self._record_drains(st, running)
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
            # job steps whose slurmd was stopped under them (a node failure, `local fault`):
            # their tasks first, then the slurmstepd
            steps = procs.left_in(self.state_dir, "slurmstepd")
            if steps:
                progress(f"stopping {sum(p.name == 'slurmstepd' for p in steps)} job step(s) "
                         "left by stopped slurmds")
                procs.stop([p for p in steps if p.name != "slurmstepd"], timeout=5)
                procs.stop([p for p in steps if p.name == "slurmstepd"], timeout=5)
            hosts.remove_block(self.state_dir)
            if st is not None:
                st.procs = []
                st.stopped = time.time()
                state.save(self.state_dir, st)
        if purge:
            if st is not None:
                for path in mounts.release(st.mounts, self.state_dir):
                    progress(f"removed the stand-in {path}")
            mariadb.purge(mariadb.layout(self.state_dir))
            self._remove_state_folder()
        return [*running_obs, *(p.name for p in running)]

    def check_removable(self) -> None:
        """Refuse (one line) to purge a folder pctk did not make: it must be this user's and
        hold this user's twin.json, or (a start refused early, a purge stopped half-way)
        nothing but what a twin writes (:data:`toolkit.local.state.TWIN_ENTRIES`). A folder
        that does not exist is fine: there is nothing to remove."""
        if not self.state_dir.exists() and not self.state_dir.is_symlink():
            return
        marker = self.state_file
        why = None
        if self.state_dir.is_symlink() or not self.state_dir.is_dir():
            why = "is not a folder"
        elif self.state_dir.stat().st_uid != os.getuid():
            why = "belongs to another user"
        elif marker.is_symlink() or not marker.is_file():
            foreign = state.foreign_entries(self.state_dir)
            if foreign:
                why = (f"holds no {marker.name} and {', '.join(foreign[:3])}"
                       f"{' and more' if len(foreign) > 3 else ''}, which no twin writes: it "
                       "is not a twin's folder")
        elif marker.stat().st_uid != os.getuid():
            why = "belongs to another user"
        if why:
            raise PctkError(f"{self.state_dir} {why}; nothing removed",
                            "pctk removes only the twin folders it made; delete it yourself "
                            "if it must go")

    def _remove_state_folder(self) -> None:
        """Delete this twin's state; other clusters' twins kept inside (an old root) stay."""
        if not self.state_dir.is_dir():
            return
        self.check_removable()
        nested = {p for p in self.state_dir.iterdir() if state.state_file(p).is_file()}
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
        env = self._cmd_env()
        ids = slurm.queued_jobs(env=env)
        if not ids:
            return
        slurm.cancel(*ids, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not slurm.queued_jobs(env=env):
                return
            time.sleep(0.3)

    # ---------------------------------------------------------------- status
    def status(self) -> TwinStatus:
        st = self._load_state()
        ps = self._procs(st)
        daemons = [
            {"name": p.name, "pid": p.pid, "running": procs.is_running(p), "log": p.log}
            for p in ps
        ]
        missing = state.missing_daemons(st)
        running = bool(ps) and not missing and all(d["running"] for d in daemons)
        ctld_up = any(d["name"] == "slurmctld" and d["running"] for d in daemons)
        nodes = slurm.node_details(env=self._cmd_env()) if ctld_up else []
        return TwinStatus(
            state_dir=self.state_dir,
            running=running,
            config=st.config if st else None,
            cluster=st.cluster if st else None,
            daemons=daemons,
            nodes=nodes,
            partitions=list(st.partitions) if st else [],
            accounting=st.accounting if st else False,
            notes=[n for n in st.notes if n.startswith(SHOWN_NOTES)] if st else [],
            missing=missing,
            mounts=list(st.mounts) if st else [],
            power_events=power.events(self.state_dir, limit=10) if st else [],
            faults=_faults(self.state_dir),
            slurm_version=st.slurm_version if st else None,
            slurm_prefix=st.slurm_prefix if st else None,
        )
