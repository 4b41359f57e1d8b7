"""Which cluster are we submitting to? The config that describes it, found the way users expect.

Order: an explicit path; ``$PCTK_CLUSTER_CONFIG``; the config of the twin ``SLURM_CONF``
points at; the running twin under ``$PCTK_TWIN_DIR``; ParallelCluster's own copy on a head node
(``/opt/parallelcluster/shared/cluster-config.yaml``); the running twin under the default root.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from toolkit.config.model import ClusterTopology, load_topology
from toolkit.errors import PctkError
from toolkit.paths import twin_dir

PCLUSTER_CONFIG = Path("/opt/parallelcluster/shared/cluster-config.yaml")


def _twin_config(state_dir: Path) -> Path | None:
    try:
        state = json.loads((state_dir / "twin.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    cfg = state.get("config") if isinstance(state, dict) else None
    return Path(cfg) if cfg and state.get("procs") else None


def _running_twin_config(root: Path) -> Path | None:
    """The config of the twin that runs under a twin root (a cluster folder each)."""
    legacy = _twin_config(root)  # a root that is itself one twin's state folder
    if legacy:
        return legacy
    from toolkit.local import clusters

    up = clusters.running(root)
    cfg = clusters.config_of(next(iter(up.values()))) if len(up) == 1 else None
    return Path(cfg) if cfg else None


def find_cluster_config(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        from toolkit.local.twin import resolve_config

        return resolve_config(explicit)
    if env := os.environ.get("PCTK_CLUSTER_CONFIG"):
        return Path(env)
    if conf := os.environ.get("SLURM_CONF"):
        cfg = _twin_config(Path(conf).parent.parent)  # <twin>/etc/slurm.conf
        if cfg:
            return cfg
    if env := os.environ.get("PCTK_TWIN_DIR"):
        cfg = _running_twin_config(Path(env))
        if cfg:
            return cfg
    if PCLUSTER_CONFIG.exists():
        return PCLUSTER_CONFIG
    cfg = _running_twin_config(twin_dir())
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
    """SLURM_CONF of the running twin when nothing else points Slurm's commands anywhere."""
    if os.environ.get("SLURM_CONF") or SYSTEM_SLURM_CONF.exists():
        return {}
    from toolkit.local import clusters

    return clusters.running_env(twin_dir())


def use_running_twin() -> None:
    """Point this process's Slurm commands at the running twin, as `pctk local env` would."""
    os.environ.update(twin_env_if_needed())
