"""``pctk config diff``: semantic differences by YAML path; named list items match by Name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolkit.config.findings import format_path

_MISSING = object()


@dataclass(frozen=True)
class Change:
    kind: str  # "added" | "removed" | "changed"
    path: str
    old: Any = None
    new: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "old": self.old, "new": self.new}


def _named(items: list[Any]) -> dict[str, Any] | None:
    """``{name: item}`` if every item is a mapping with a unique Name (or Key), else None."""
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict):
            return None
        name = item.get("Name", item.get("Key"))
        if not isinstance(name, str) or name in out:
            return None
        out[name] = item
    return out


def diff_configs(a: Any, b: Any) -> list[Change]:
    changes: list[Change] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for key in list(x) + [k for k in y if k not in x]:
                sub = f"{path}.{key}" if path else str(key)
                walk(x.get(key, _MISSING), y.get(key, _MISSING), sub)
            return
        if isinstance(x, list) and isinstance(y, list):
            nx, ny = _named(x), _named(y)
            if nx is not None and ny is not None:
                for name in list(nx) + [n for n in ny if n not in nx]:
                    walk(nx.get(name, _MISSING), ny.get(name, _MISSING), f"{path}[{name}]")
                return
            if len(x) == len(y):
                for i, (ix, iy) in enumerate(zip(x, y, strict=True)):
                    walk(ix, iy, f"{path}[{i}]")
                return
        if x is _MISSING:
            changes.append(Change("added", path or format_path(()), new=y))
        elif y is _MISSING:
            changes.append(Change("removed", path or format_path(()), old=x))
        elif x != y or type(x) is not type(y):
            changes.append(Change("changed", path or format_path(()), old=x, new=y))

    walk(a, b, "")
    return changes
