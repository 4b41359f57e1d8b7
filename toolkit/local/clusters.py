"""One twin per cluster name under the twin root: ``<root>/<cluster>/``.

Each cluster keeps its own StateSaveLocation, MariaDB and accounting history. One twin runs at
a time: ``up`` of another config stops the running one (its state stays) and starts or resumes
the other; one ``up`` at a time per root (:func:`toolkit.local.state.up_lock`), so two at the
same moment never leave two twins running. ``status``/``env``/``down`` mean the running twin
unless a cluster is named.
A state folder from before this layout (``twin.json`` in the root itself) still counts.
"""

from __future__ import annotations

import os
from pathlib import Path

from toolkit.errors import PctkError
from toolkit.local import precheck, slurmimage, state, stopsignals
from toolkit.local.twin import Progress, Twin, TwinStatus
from toolkit.paths import checked_state_path, resolve_config, twin_dir


def _quiet(_: str) -> None:
    pass


def root_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """The twin root: ``root`` (``--state-dir``, which typer may fill from PCTK_TWIN_DIR),
    checked like every state root, else :func:`toolkit.paths.twin_dir`."""
    if root is None:
        return twin_dir().absolute()
    # typer fills --state-dir from PCTK_TWIN_DIR: name the one the user wrote
    source = ("PCTK_TWIN_DIR" if os.fspath(root) == os.environ.get("PCTK_TWIN_DIR")
              else "--state-dir")
    return checked_state_path(root, source).absolute()


def known(root: str | os.PathLike[str] | None = None) -> dict[str, Twin]:
    """Every twin under the root, by cluster name (a legacy root-level twin included)."""
    base = root_dir(root)
    return {name: Twin(d, root=base) for name, d in state.known(base).items()}


def running(root: str | os.PathLike[str] | None = None) -> dict[str, Twin]:
    """Twins with any daemon up (running or degraded)."""
    return {n: t for n, t in known(root).items() if t.any_daemon_up()}


def select(root: str | os.PathLike[str] | None = None, cluster: str | None = None) -> Twin:
    """The twin meant: the named cluster's, else the running one, else the last started."""
    base = root_dir(root)
    return Twin(state.select(base, cluster), root=base)


def up(config: str | os.PathLike[str] | None, root: str | os.PathLike[str] | None = None, *,
       nodes: int | None = None, accounting: bool | None = None,
       progress: Progress = _quiet, boot_delay: float | None = None,
       force: bool = False, slurm_release: str | None = None) -> TwinStatus:
    """Start the config's twin in its own folder, stopping another cluster's running twin.

    ``pctk config check`` runs first: a config it rejects stops nothing and starts nothing,
    unless ``force``. ``accounting`` None follows the config's SlurmSettings/Database.
    ``slurm_release``: ``--slurm`` (toolkit.local.slurmimage.choose), built before anything
    is stopped.
    """
    base = root_dir(root)
    cfg = resolve_config(config)
    errors = precheck.findings(cfg)  # before anything is stopped
    if errors and not force:
        raise precheck.refusal(cfg, errors)
    if slurm_release is None and not os.environ.get("PCTK_SLURM"):
        # this cluster's twin keeps the release it last ran
        slurm_release = slurm_of(known(root).get(state.cluster_of(cfg)))
    with stopsignals.as_exceptions():  # SIGTERM during a build stops its compilers too
        image = slurmimage.choose(slurm_release, progress)
    slurm_release = image.version if image else slurmimage.SYSTEM
    name = state.cluster_of(cfg)
    # SIGTERM/SIGHUP while waiting for the lock or stopping another twin end `up` cleanly too
    with stopsignals.as_exceptions(), state.up_lock(base, progress):
        twins = known(base)
        target = twins.get(name) or Twin(base / name, root=base)
        _refuse_a_namesake(target, cfg, name)
        for other_name, other in running(base).items():
            if other_name == name:
                continue
            progress(f"stopping the twin of cluster {other_name} (state and accounting kept "
                     f"in {other.state_dir}; `pctk local up --cluster {other_name}` resumes it)")
            other.down(progress=progress)
        extra = {} if boot_delay is None else {"boot_delay": boot_delay}
        # a forced start: the twin checks again to say so and keep it in its notes
        return target.up(cfg, nodes=nodes, accounting=accounting, progress=progress,
                         force=force, check=bool(errors), slurm_release=slurm_release,
                         **extra)


def _refuse_a_namesake(twin: Twin, cfg: Path, name: str) -> None:
    """Two configs whose names differ but give one Slurm cluster name (rt-x.yaml and
    rt_x.yaml: Slurm allows no '-') would share one twin: the second's ``up`` would restart
    the first's and cancel its jobs. Refused; the same name in another folder is the same
    cluster, as in ParallelCluster, and restarts it."""
    st = state.load(twin.state_dir)
    held = Path(st.config).stem if st and st.config else None
    if held is not None and held != cfg.stem:
        raise PctkError(
            f"{cfg.name} and the twin of {held}.yaml ({st.config if st else ''}) both map to "
            f"Slurm cluster name {name!r}, so they would share one twin",
            f"rename one config (names differ in more than '-' and '_'), or remove the other "
            f"twin: pctk local down --cluster {name} --purge")


def slurm_of(twin: Twin | None) -> str | None:
    """The Slurm release a twin last ran (``system`` or a built version), None if none."""
    st = state.load(twin.state_dir) if twin else None
    if st is None or st.slurm_version is None:
        return None
    return st.slurm_version if st.slurm_prefix else slurmimage.SYSTEM


def config_of(twin: Twin) -> str | None:
    """The config file a twin was last started with."""
    st = state.load(twin.state_dir)
    return st.config if st else None


def nodes_of(twin: Twin) -> int | None:
    """The --nodes a twin was last started with (None: the config's node counts)."""
    st = state.load(twin.state_dir)
    if st is None or st.version < 2:
        return None  # written when 4 was the silent default, not the user's choice
    return st.nodes_per_resource


def running_env(root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """SLURM_CONF and PCTK_TWIN_DIR of the one running twin ({} when none or several)."""
    return state.running_env(root_dir(root))
