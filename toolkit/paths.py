"""Where pctk keeps things: presets shipped with the package, per-user state.

Every path pctk writes by default is computed here, under one state root:
``$PCTK_HOME`` (else ``$XDG_STATE_HOME/pctk``, else ``~/.local/state/pctk``). A specific
variable overrides its own path: ``PCTK_TWIN_DIR``, ``PCTK_JOBS_DIR``, ``PCTK_RESULTS_DB``,
``PCTK_SLURM_IMAGES``.

Private by default: a folder these functions name is created on first use 0700 (its missing
parents, the state root among them, 0711: others may pass through to a twin's slurm.conf and
munge socket, never list), so benchmark, health and job folders, and the logs in them, stay
the owner's whatever the umask. The twin's own layout: :mod:`toolkit.local.files`.
"""

from __future__ import annotations

import datetime as dt
import difflib
import os
from pathlib import Path

from toolkit.errors import PctkError
from toolkit.fsutil import PASSAGE_DIR, private_dirs

# the folder holding the toolkit and benchmarks packages: a source checkout, or site-packages
# when pctk is installed from its wheel (which then carries cluster-configs/ and sbatch/
# inside the package, see pyproject.toml)
_CODE_ROOT = Path(__file__).resolve().parent.parent
_REPO_PRESETS = _CODE_ROOT / "cluster-configs"
_PACKAGED_PRESETS = Path(__file__).resolve().parent / "_presets"
_REPO_SBATCH = _CODE_ROOT / "sbatch"
_PACKAGED_SBATCH = Path(__file__).resolve().parent / "_sbatch"

DEFAULT_PRESET = "p5-training"


def code_root() -> Path:
    """Where ``toolkit`` and ``benchmarks`` are importable from: the checkout, or site-packages.

    Jobs put it on ``PYTHONPATH`` (and ``--chdir`` there) so the nodes run the same code.
    """
    return _CODE_ROOT


def sbatch_dir() -> Path:
    """The plain batch scripts (``sbatch/``; inside the package when installed from a wheel)."""
    return _REPO_SBATCH if _REPO_SBATCH.is_dir() else _PACKAGED_SBATCH


def sbatch_script(name: str) -> Path:
    """A script of :func:`sbatch_dir` by file name (``collectives.sbatch``)."""
    return sbatch_dir() / name


def presets_dir() -> Path:
    """The folder of validated cluster configs (the repo's, or the copy inside a wheel)."""
    return _REPO_PRESETS if _REPO_PRESETS.is_dir() else _PACKAGED_PRESETS


def preset_path(name: str) -> Path:
    """Path of a preset by name (``p5-training``) or file name (``p5-training.yaml``)."""
    stem = name.removesuffix(".yaml")
    return presets_dir() / f"{stem}.yaml"


def list_presets() -> list[str]:
    return sorted(p.stem for p in presets_dir().glob("*.yaml"))


def config_or_preset(ref: str | os.PathLike[str]) -> Path:
    """A cluster config given as a file path or a preset name (``p5-training``).

    An existing file wins; otherwise a preset of that name; otherwise the path unchanged,
    so the caller reports the missing file in its own words.
    """
    path = Path(ref)
    if path.exists():
        return path
    name = str(ref)
    if name and "/" not in name:
        preset = preset_path(name)
        if preset.is_file():
            return preset
    return path


def resolve_config(config: str | os.PathLike[str] | None) -> Path:
    """A config that must exist: a file path, or the name of a preset in cluster-configs/
    (default: the p5 preset); anything else is a one-line PctkError naming the presets."""
    if config is None:
        return preset_path(DEFAULT_PRESET)
    p = config_or_preset(config)
    if p.exists():
        return p.resolve()
    raise missing_config(config)


def missing_config(config: str | os.PathLike[str]) -> PctkError:
    """A config that is neither a file nor a preset: the nearest preset names, then all."""
    presets = list_presets()
    close = difflib.get_close_matches(Path(config).stem, presets, n=2, cutoff=0.6)
    guess = f"did you mean {' or '.join(close)}? Else " if close else ""
    return PctkError(f"cluster config {config!s} not found",
                     f"{guess}give a YAML file or a preset: {', '.join(presets)}")


# folders a state root must never be: pctk creates and, on `--purge`, removes folders inside
# its roots, and a root that is one of these would put its state among the system's files
SYSTEM_FOLDERS = frozenset(map(Path, (
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt",
    "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin",
    "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share", "/var", "/var/lib", "/var/log",
    "/var/tmp", "/var/run")))


def checked_state_path(value: str | os.PathLike[str], source: str) -> Path:
    """A state root or file (``PCTK_HOME``, ``PCTK_TWIN_DIR``, ``--state-dir``, ...) that may
    hold pctk's state: not empty, not the root folder, a system folder or the home folder
    itself. ``source`` names where the value came from, for the one-line refusal."""
    text = os.fspath(value)
    if not text.strip():
        raise PctkError(f"{source} is set but empty",
                        f"unset it for the default place, or name a folder: {source}=DIR")
    path = Path(text)
    resolved = path.expanduser().resolve()
    home = Path.home().resolve()
    if resolved in SYSTEM_FOLDERS or resolved == home:
        what = "the root folder" if resolved == Path("/") else (
            "your home folder" if resolved == home else f"the system folder {resolved}")
        raise PctkError(f"{source}={text} would put pctk's state (results.db, twin/, jobs/) in "
                        f"{what}", f"name a folder of its own: {source}=DIR")
    return path


def _env_path(name: str) -> Path | None:
    """The path a variable names; None when unset. Set but empty is a mistake (a script's
    unset variable), not a wish for the default: refused, as are the root, system and home
    folders themselves (:func:`checked_state_path`)."""
    value = os.environ.get(name)
    if value is None:
        return None
    return checked_state_path(value, name)


def state_home() -> Path:
    """Per-user state root: ``$PCTK_HOME``, ``$XDG_STATE_HOME/pctk`` or ~/.local/state/pctk."""
    if env := _env_path("PCTK_HOME"):
        return env
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "pctk"


def _made(path: Path, mode: int = 0o700) -> Path:
    """``path``, created private if missing (a folder pctk cannot create is reported by
    whatever writes into it)."""
    try:
        return private_dirs(path, mode, PASSAGE_DIR)
    except OSError:
        return path


def twin_dir() -> Path:
    """State folder of the local twin: ``$PCTK_TWIN_DIR`` or ``<state home>/twin``."""
    # a twin's clients and jobs pass through it (enter, not list): see toolkit.local.files
    return _made(_env_path("PCTK_TWIN_DIR") or state_home() / "twin", PASSAGE_DIR)


def slurm_images_dir() -> Path:
    """Slurm releases built for the twin (toolkit.local.slurmimage): ``$PCTK_SLURM_IMAGES`` or
    ``<state home>/slurm``; not created here (a build creates it)."""
    return _env_path("PCTK_SLURM_IMAGES") or state_home() / "slurm"


def jobs_dir() -> Path:
    """Job scripts and logs of ``pctk submit``: ``$PCTK_JOBS_DIR`` or ``<state home>/jobs``."""
    return _made(_env_path("PCTK_JOBS_DIR") or state_home() / "jobs")


def results_db() -> Path:
    """The results database: ``$PCTK_RESULTS_DB`` or ``<state home>/results.db``."""
    if env := _env_path("PCTK_RESULTS_DB"):
        return results_db_file(env)
    return _made(state_home(), PASSAGE_DIR) / "results.db"


def results_db_file(path: Path) -> Path:
    """``path`` as a results database: a file, never a folder (the store keeps its logs in
    ``<name>.logs`` beside it). ``--db`` reads ``$PCTK_RESULTS_DB`` itself (typer's envvar),
    so the variable reaches the store without :func:`_env_path`: both are checked here."""
    if not path.name or path.is_dir():
        example = "DIR/results.db" if path.resolve() == Path("/") else path / "results.db"
        raise PctkError(f"results database {path} is a folder, not a database file",
                        f"name a file: --db {example} or PCTK_RESULTS_DB={example}")
    return path


def health_dir() -> Path:
    """Parent of ``pctk health run``'s run folders: ``<state home>/health``."""
    return _made(state_home() / "health")


def runs_dir() -> Path:
    """Parent of the benchmarks' default run folders: ``<state home>/runs``."""
    return _made(state_home() / "runs")


def new_run_dir(kind: str) -> Path:
    """A fresh run folder name for one benchmark run: ``<runs>/<kind>-<UTC stamp>``."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return runs_dir() / f"{kind}-{stamp}"
