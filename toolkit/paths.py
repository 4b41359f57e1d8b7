"""Where pctk keeps things: presets shipped with the package, per-user state."""

from __future__ import annotations

import os
from pathlib import Path

_REPO_PRESETS = Path(__file__).resolve().parent.parent / "cluster-configs"
_PACKAGED_PRESETS = Path(__file__).resolve().parent / "_presets"

DEFAULT_PRESET = "p5-training"


def presets_dir() -> Path:
    """The folder of validated cluster configs (the repo's, or the copy inside a wheel)."""
    return _REPO_PRESETS if _REPO_PRESETS.is_dir() else _PACKAGED_PRESETS


def preset_path(name: str) -> Path:
    """Path of a preset by name (``p5-training``) or file name (``p5-training.yaml``)."""
    stem = name.removesuffix(".yaml")
    return presets_dir() / f"{stem}.yaml"


def list_presets() -> list[str]:
    return sorted(p.stem for p in presets_dir().glob("*.yaml"))


def state_home() -> Path:
    """Per-user state root: ``$PCTK_HOME``, ``$XDG_STATE_HOME/pctk`` or ~/.local/state/pctk."""
    if env := os.environ.get("PCTK_HOME"):
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "pctk"


def twin_dir() -> Path:
    """State folder of the local twin: ``$PCTK_TWIN_DIR`` or ``<state home>/twin``."""
    if env := os.environ.get("PCTK_TWIN_DIR"):
        return Path(env)
    return state_home() / "twin"
