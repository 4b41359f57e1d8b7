"""Which cluster are we submitting to? The config that describes it, found the way users expect.

Order: an explicit path; ``$PCTK_CLUSTER_CONFIG``; the config of the twin ``SLURM_CONF``
points at; the running twin under ``$PCTK_TWIN_DIR``; ParallelCluster's own copy on a head node
(``/opt/parallelcluster/shared/cluster-config.yaml``); the running twin under the default root.
"""

from __future__ import annotations

import os
from pathlib import Path

from toolkit.config.model import ClusterTopology, load_topology
from toolkit.errors import PctkError
from toolkit.local import state
from toolkit.paths import resolve_config, twin_dir

PCLUSTER_CONFIG = Path("/opt/parallelcluster/shared/cluster-config.yaml")


def find_cluster_config(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return resolve_config(explicit)
    if env := os.environ.get("PCTK_CLUSTER_CONFIG"):
        return Path(env)
    if conf := os.environ.get("SLURM_CONF"):
        cfg = state.config_in_use(Path(conf).parent.parent)  # <twin>/etc/slurm.conf
        if cfg:
            return cfg
    if env := os.environ.get("PCTK_TWIN_DIR"):
        cfg = state.running_config(Path(env))
        if cfg:
            return cfg
    if PCLUSTER_CONFIG.exists():
        return PCLUSTER_CONFIG
    cfg = state.running_config(twin_dir())
    if cfg:
        return cfg
    raise PctkError(
        "no cluster config found",
        "pass --config FILE, set PCTK_CLUSTER_CONFIG, or start the twin with `pctk local up`",
    )


def load_cluster(explicit: str | os.PathLike[str] | ClusterTopology | None = None
                 ) -> ClusterTopology:
    if isinstance(explicit, ClusterTopology):
        return explicit
    return load_topology(find_cluster_config(explicit))


SYSTEM_SLURM_CONF = Path("/etc/slurm/slurm.conf")


def twin_env_if_needed() -> dict[str, str]:
    """SLURM_CONF of the running twin when nothing else points Slurm's commands anywhere;
    and when SLURM_CONF already names a twin's slurm.conf, that twin's Slurm release on PATH
    (as `pctk local env` exports it): a shell that exported SLURM_CONF alone would otherwise
    run this machine's 22.05 clients (and submitit's sbatch and scancel) against a 24.11
    controller, which refuses clients more than two releases older."""
    if conf := os.environ.get("SLURM_CONF"):
        return _release_path(Path(conf).parent.parent)  # <twin>/etc/slurm.conf
    if SYSTEM_SLURM_CONF.exists():
        return {}
    return state.running_env(twin_dir().absolute())


def _release_path(twin: Path) -> dict[str, str]:
    """PATH with the Slurm release of the twin in ``twin`` first (and no other built one);
    nothing when the folder holds no twin or PATH is already right."""
    try:
        st = state.load(twin)
    except PctkError:
        return {}  # another user's twin: its own commands will say so
    if st is None:
        return {}
    path = state.env(twin, twin.parent, prefix=st.slurm_prefix or None).get("PATH")
    return {"PATH": path} if path and path != os.environ.get("PATH") else {}


def use_running_twin() -> None:
    """Point this process's Slurm commands at the running twin, as `pctk local env` would."""
    os.environ.update(twin_env_if_needed())
