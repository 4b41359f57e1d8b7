"""The presets in cluster-configs/: each is rendered from cluster-configs/specs/<name>.yaml.

``regenerate()`` rewrites them; ``regenerate(check_only=True)`` lists the ones that differ
from what their spec renders (a test keeps them byte for byte in sync).
"""

from __future__ import annotations

from pathlib import Path

from toolkit.config.render import render_cluster_config
from toolkit.config.spec import load_spec
from toolkit.fsutil import atomic_write_text
from toolkit.paths import presets_dir


def specs_dir() -> Path:
    return presets_dir() / "specs"


def spec_paths() -> list[Path]:
    return sorted(specs_dir().glob("*.yaml"))


def _display(path: Path) -> str:
    """The spec path as written in the generated header: relative to the repo, stable."""
    return f"cluster-configs/specs/{path.name}"


def render_preset(spec_path: Path) -> str:
    return render_cluster_config(load_spec(spec_path), _display(spec_path))


def regenerate(check_only: bool = False) -> list[Path]:
    """Presets whose file differs from their spec's rendering (rewritten unless check_only)."""
    changed: list[Path] = []
    for spec_path in spec_paths():
        target = presets_dir() / spec_path.name
        text = render_preset(spec_path)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != text:
            changed.append(target)
            if not check_only:
                atomic_write_text(target, text)
    return changed


if __name__ == "__main__":
    for path in regenerate():
        print(f"wrote {path}")
