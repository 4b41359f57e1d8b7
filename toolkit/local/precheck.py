"""``pctk config check`` before a twin starts: a config that ParallelCluster would refuse
(MinCount above MaxCount, a missing HeadNode...) is refused here too, before any running
twin is stopped. ``--force`` starts it anyway and says so on every start."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from toolkit.config.check import check_file
from toolkit.errors import PctkError

SHOWN = 3  # findings named in the one-line refusal; `pctk config check` lists them all


def findings(cfg: Path) -> list[str]:
    """The ERROR findings of ``pctk config check`` for ``cfg``, one line each."""
    report = check_file(cfg)
    return [f"{f.path_str}: {f.message.rstrip('.')}" for f in report.errors]


def refusal(cfg: Path, errors: list[str]) -> PctkError:
    return PctkError(
        f"`pctk config check` rejects {cfg} ({len(errors)} error"
        f"{'s' if len(errors) > 1 else ''}: {_listed(errors)}); nothing was started or stopped",
        f"fix the config (`pctk config check {cfg}` lists each with its line), or start "
        "the twin anyway with --force")


def _listed(errors: list[str]) -> str:
    more = f"; and {len(errors) - SHOWN} more" if len(errors) > SHOWN else ""
    return "; ".join(errors[:SHOWN]) + more


def check_before_start(cfg: Path, *, force: bool, progress: Callable[[str], None]) -> list[str]:
    """Refuse (PctkError, exit 2) a config with errors unless ``force``; with ``force`` the
    errors are said through ``progress`` and returned, so the twin's notes keep them."""
    errors = findings(cfg)
    if not errors:
        return []
    if not force:
        raise refusal(cfg, errors)
    note = (f"WARNING: started with --force although `pctk config check` rejects this config "
            f"(ParallelCluster would not create it): {_listed(errors)}")
    progress(note)
    return [note]
