"""What a twin's state folder records (``twin.json``), and which twins a twin root holds.

``twin.json`` is written by ``Twin.up`` (once per daemon started, so a crash mid-start still
leaves the pids to stop) and by ``Twin.down``; everything else only reads it: the CLI's
status, the cluster finder of ``pctk submit`` (:mod:`toolkit.submit.cluster`), the faults.
A missing, torn or foreign file reads as no state (a twin that crashed or never ran); a
malformed ``procs`` list reads as no processes. Keys this module does not know are kept
when the file is written again.

A node's slurmd may have been replaced since ``up`` recorded it (static node replacement,
a powered-up dynamic node): :func:`live_procs` asks :mod:`toolkit.local.power` for the one
running now. Importing this module does not import the daemon manager (``toolkit.local.twin``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.config.model import load_topology
from toolkit.errors import PctkError
from toolkit.fsutil import PASSAGE_DIR, atomic_write_json, private_dirs
from toolkit.local import power, procs, slurmimage
from toolkit.local.plan import Ports, slurm_cluster_name
from toolkit.paths import resolve_config

# 2: nodes_per_resource None means the config's counts (1 stored the default 4)
STATE_VERSION = 2
STATE_FILE = "twin.json"


@dataclass
class TwinState:
    """One twin's ``twin.json``: how it was started and the processes it started."""

    config: str | None = None  # the cluster config file (absolute)
    config_sha256: str | None = None
    cluster: str | None = None  # Slurm's cluster name (the folder name under the root)
    nodes_per_resource: int | None = None  # --nodes; None: the config's counts
    accounting: bool = False
    ports: Ports | None = None
    nodes: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)
    procs: list[procs.Proc] = field(default_factory=list)  # what `up` started, in order
    started: float | None = None  # time.time() of the last `up`
    drains: dict[str, str] = field(default_factory=dict)  # node -> an operator's reason
    notes: list[str] = field(default_factory=list)  # what `up` capped or skipped
    mounts: list[dict[str, Any]] = field(default_factory=list)  # toolkit.local.mounts records
    stopped: float | None = None  # time.time() of the last `down`
    # the Slurm the daemons run: its version, and the image prefix (None: the system's)
    slurm_version: str | None = None
    slurm_prefix: str | None = None
    version: int = STATE_VERSION
    extra: dict[str, Any] = field(default_factory=dict)  # keys of other versions, kept

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "config": self.config,
            "config_sha256": self.config_sha256,
            "cluster": self.cluster,
            "nodes_per_resource": self.nodes_per_resource,
            "accounting": self.accounting,
            "ports": self.ports.to_json() if self.ports else None,
            "nodes": list(self.nodes),
            "partitions": list(self.partitions),
            "procs": [p.to_json() for p in self.procs],
            "started": self.started,
            "drains": dict(self.drains),
            "notes": list(self.notes),
            "mounts": list(self.mounts),
        }
        if self.stopped is not None:
            out["stopped"] = self.stopped
        if self.slurm_version is not None:
            out["slurm_version"] = self.slurm_version
        if self.slurm_prefix is not None:
            out["slurm_prefix"] = self.slurm_prefix
        return {**self.extra, **out}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TwinState:
        """Tolerant: a field of the wrong type reads as its default."""
        def opt(key: str, *kinds: type) -> Any:
            value = d.get(key)
            return value if isinstance(value, kinds) and not isinstance(value, bool) else None

        def strings(key: str) -> list[str]:
            value = d.get(key)
            return [str(x) for x in value] if isinstance(value, list) else []

        try:
            started = [procs.Proc.from_json(p) for p in d.get("procs") or []]
        except (KeyError, TypeError, ValueError, AttributeError):
            started = []
        drains = d.get("drains")
        mounts = d.get("mounts")
        return cls(
            config=opt("config", str),
            config_sha256=opt("config_sha256", str),
            cluster=opt("cluster", str),
            nodes_per_resource=opt("nodes_per_resource", int),
            accounting=bool(d.get("accounting")),
            ports=Ports.from_json(d.get("ports")),
            nodes=strings("nodes"),
            partitions=strings("partitions"),
            procs=started,
            started=opt("started", int, float),
            drains={str(k): str(v) for k, v in drains.items()} if isinstance(drains, dict)
            else {},
            notes=strings("notes"),
            mounts=[m for m in mounts if isinstance(m, dict)] if isinstance(mounts, list) else [],
            stopped=opt("stopped", int, float),
            slurm_version=opt("slurm_version", str),
            slurm_prefix=opt("slurm_prefix", str),
            version=opt("version", int) or 0,  # none: written before versions were recorded
            extra={k: v for k, v in d.items() if k not in _KNOWN},
        )


_KNOWN = frozenset({"version", "config", "config_sha256", "cluster", "nodes_per_resource",
                    "accounting", "ports", "nodes", "partitions", "procs", "started", "drains",
                    "notes", "mounts", "stopped", "slurm_version", "slurm_prefix"})


# --------------------------------------------------------------------- the file
# What a twin writes in its state folder (toolkit.local.files' folders, the state, lock and
# fault files, the observability stack); atomic writes leave ".<name>.*.tmp" files
TWIN_ENTRIES = frozenset({
    "bin", "ctld", "dbd", "etc", "lib", "log", "munge", "mysql", "nodes", "power", "observe",
    STATE_FILE, "power.json", "faults.json", ".lock", ".faults.lock", ".up.lock"})


def foreign_entries(state_dir: Path) -> list[str]:
    """Names in ``state_dir`` that no twin writes (a nested twin's folder is a twin's)."""
    try:
        names = sorted(p.name for p in state_dir.iterdir())
    except OSError:
        return []
    return [n for n in names if n not in TWIN_ENTRIES
            and not (n.startswith(".") and n.endswith(".tmp"))
            and not state_file(state_dir / n).is_file()]


def state_file(state_dir: Path) -> Path:
    return state_dir / STATE_FILE


def load(state_dir: Path) -> TwinState | None:
    """The twin's recorded state; None when there is none or it cannot be read. Another
    user's (permission denied) is a one-line PctkError: it is not "stopped"."""
    try:
        data = json.loads(state_file(state_dir).read_text())
    except PermissionError:
        raise not_yours(state_dir) from None
    except (OSError, ValueError):
        return None  # missing, or a torn or foreign file: treat as crashed
    return TwinState.from_json(data) if isinstance(data, dict) else None


def save(state_dir: Path, state: TwinState) -> None:
    """Write twin.json atomically (readers never see half a file)."""
    atomic_write_json(state_file(state_dir), state.to_json())


@contextlib.contextmanager
def lock(state_dir: Path) -> Iterator[None]:
    """One ``up`` or ``down`` at a time per state folder; a second one is refused at once."""
    try:
        private_dirs(state_dir, PASSAGE_DIR)  # clients and jobs pass through (local.files)
        fh = open(state_dir / ".lock", "w")  # noqa: SIM115 (closed below)
    except PermissionError:
        raise not_yours(state_dir) from None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PctkError(
                f"another pctk is starting or stopping the twin in {state_dir}",
                "wait for it to finish",
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------- another user's twin
TWIN_DAEMONS = frozenset({"slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd"})


def _owner(path: Path) -> str:
    """The account owning ``path`` (or its nearest existing parent)."""
    for p in (path, *path.parents):
        try:
            uid = p.stat().st_uid
        except OSError:
            continue
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return f"uid {uid}"
    return "another user"


def daemons_under(folder: Path) -> list[int]:
    """Pids of twin daemons whose command line names a path inside ``folder``, whoever runs
    them (/proc/<pid>/cmdline is readable by every user; a twin's daemons are started with
    their state folder's paths: ``slurmctld -f <state>/etc/slurm.conf``, ``munged
    --socket=<state>/munge/...``)."""
    inside = str(folder).rstrip("/") + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or os.path.basename(argv[0].decode(errors="replace")) not in TWIN_DAEMONS:
            continue
        if any(inside in a.decode(errors="replace") for a in argv[1:]):
            found.append(int(entry.name))
    return found


def not_yours(folder: Path) -> PctkError:
    """What to say when this user may not read a twin folder: whose it is, and whether a
    twin runs there (seen from the daemons' command lines, not from its private state)."""
    owner = _owner(folder)
    hint = (f"run pctk as {owner}, or use a twin folder of your own (unset PCTK_HOME / "
            "PCTK_TWIN_DIR, or --state-dir)")
    if daemons_under(folder):
        return PctkError(f"a twin of another user ({owner}) runs in {folder}: permission "
                         "denied (its state is private)", hint)
    return PctkError(f"permission denied: {folder} belongs to {owner}", hint)


@contextlib.contextmanager
def up_lock(root: Path, progress: Callable[[str], None]) -> Iterator[None]:
    """One ``pctk local up`` at a time per twin root, held across the whole ``up``.

    ``up`` of one cluster stops another cluster's running twin first; two at the same moment
    would each find the other not yet running and start two twins in one root. A second
    ``up`` waits for the first (then finds its twin running, and stops or keeps it as ``up``
    does). A file of its own: the root may itself be one twin's folder (its ``.lock``).
    """
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".up.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another `pctk local up` in {root}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------- its processes
def live_procs(state_dir: Path, state: TwinState | None) -> list[procs.Proc]:
    """What `up` started, with each node's slurmd as the power programs last recorded it
    (a replaced static node has a new slurmd; a powered-up dynamic node has one)."""
    if not state or not state.procs:
        return []
    out: list[procs.Proc] = []
    seen: set[str] = set()
    for p in state.procs:
        if p.name.startswith("slurmd:"):
            node = p.name.split(":", 1)[1]
            seen.add(node)
            now = power.recorded_slurmd(state_dir, node)
            if now is None:
                continue  # stopped on purpose: being replaced
            p = now
        out.append(p)
    for p in power.recorded(state_dir):
        if p.name.startswith("slurmd:") and p.name.split(":", 1)[1] not in seen:
            out.append(p)  # a powered-up dynamic node
    return out


def expected_daemons(state: TwinState) -> list[str]:
    """Every daemon a running twin has: munged, MariaDB and slurmdbd (with accounting),
    slurmctld, and a slurmd per static node (dynamic ones run only while powered up)."""
    return (["munged"] + (["mariadbd", "slurmdbd"] if state.accounting else [])
            + ["slurmctld"] + [f"slurmd:{n}" for n in state.nodes if "-st-" in n])


def missing_daemons(state: TwinState | None) -> list[str]:
    """Daemons a twin with processes recorded never started (an ``up`` that was killed
    half-way, before its controller or its nodes); empty for a stopped twin."""
    if not state or not state.procs:
        return []
    started = {p.name for p in state.procs}
    return [name for name in expected_daemons(state) if name not in started]


def any_daemon_up(state_dir: Path) -> bool:
    """Running or degraded: some process `up` started is still alive (no Slurm query)."""
    return any(procs.is_running(p) for p in live_procs(state_dir, load(state_dir)))


def slurm_conf(state_dir: Path) -> Path:
    return state_dir / "etc" / "slurm.conf"


def env(state_dir: Path, root: Path, prefix: str | bool | None = False) -> dict[str, str]:
    """Variables that point Slurm's commands (and submitit) at the twin in ``state_dir``.

    A twin on a built Slurm (toolkit.local.slurmimage) also puts that Slurm's bin and sbin
    first on PATH, and takes any other image's off it: every Slurm command run with these
    variables, pctk's own and those of jobs, is then the twin's release. ``prefix`` False:
    as the twin's state records; None: the system's Slurm.
    """
    if prefix is False:
        st = load(state_dir)
        prefix = st.slurm_prefix if st else None
    out = {"SLURM_CONF": str(slurm_conf(state_dir)), "PCTK_TWIN_DIR": str(root)}
    image = slurmimage.Image(version="", prefix=Path(prefix)) \
        if isinstance(prefix, str) and prefix else None
    current = os.environ.get("PATH", "")
    path = slurmimage.path_with(image, current)
    if image or path != current:  # said even when this process has it already
        out["PATH"] = path
    return out


# --------------------------------------------------------------------- twins under a root
def known(root: Path) -> dict[str, Path]:
    """Every twin's state folder under a twin root, by cluster name: ``<root>/<cluster>/``,
    and the root itself when it is one twin's folder (the layout before one per cluster)."""
    out: dict[str, Path] = {}
    legacy = load(root)
    if legacy is not None and legacy.cluster:
        out[legacy.cluster] = root
    try:
        subs = sorted(root.iterdir()) if root.is_dir() else []
    except PermissionError:
        raise not_yours(root) from None
    for sub in subs:
        try:
            if state_file(sub).is_file() and sub.name not in out:
                out[sub.name] = sub
        except PermissionError:
            raise not_yours(sub) from None
    return out


def running(root: Path) -> dict[str, Path]:
    """The twins under a root with any daemon up (running or degraded)."""
    return {name: d for name, d in known(root).items() if any_daemon_up(d)}


def cluster_of(config: str | os.PathLike[str] | None) -> str:
    """The Slurm cluster name a config's twin gets (its folder name under the root)."""
    return slurm_cluster_name(load_topology(resolve_config(config)).name)


def select(root: Path, cluster: str | None = None) -> Path:
    """The state folder of the twin meant: the named cluster's, else the running one, else
    the last started, else the default preset's (not started yet)."""
    twins = known(root)
    if cluster:
        # the name the user wrote (nc-p4d) or Slurm's for it (nc_p4d): the same twin
        for name in (cluster, slurm_cluster_name(cluster)):
            if name in twins:
                return twins[name]
        names = ", ".join(twins) or "none yet"
        raise PctkError(f"no twin of cluster {cluster!r} in {root}", f"known clusters: {names}")
    up = {name: d for name, d in twins.items() if any_daemon_up(d)}
    if len(up) > 1:
        raise PctkError(f"twins of several clusters run: {', '.join(up)}",
                        "choose one with --cluster NAME")
    if up:
        return next(iter(up.values()))
    if twins:
        return max(twins.values(), key=_started)
    return root / cluster_of(None)


def _started(state_dir: Path) -> float:
    st = load(state_dir)
    return float(st.started) if st and st.started is not None else 0.0


def running_env(root: Path) -> dict[str, str]:
    """SLURM_CONF and PCTK_TWIN_DIR of the one running twin ({} when none or several)."""
    up = running(root)
    return env(next(iter(up.values())), root) if len(up) == 1 else {}


def config_in_use(state_dir: Path) -> Path | None:
    """The config of the twin in ``state_dir`` while it has processes recorded."""
    st = load(state_dir)
    return Path(st.config) if st and st.config and st.procs else None


def running_config(root: Path) -> Path | None:
    """The config of the twin that runs under a twin root (None when none or several)."""
    legacy = config_in_use(root)  # a root that is itself one twin's state folder
    if legacy:
        return legacy
    up = running(root)
    st = load(next(iter(up.values()))) if len(up) == 1 else None
    return Path(st.config) if st and st.config else None

