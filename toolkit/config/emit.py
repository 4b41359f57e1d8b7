"""A tiny deterministic YAML emitter that puts a short ``# why`` comment above chosen keys.

PyYAML cannot write comments; the structures we render are plain mappings, lists and
scalars, so block style by hand is short and exact. Scalars are quoted by PyYAML itself.
"""

from __future__ import annotations

from typing import Any

import yaml

from toolkit.config.findings import YamlPath

Comments = dict[YamlPath, str]


def scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 20, allow_unicode=True)
    return text.removesuffix("\n...\n").rstrip("\n")


def _comment(lines: list[str], comments: Comments, path: YamlPath, indent: int) -> None:
    if path in comments:
        lines.extend(f"{' ' * indent}# {c}" for c in comments[path].splitlines())


def _mapping(data: dict[str, Any], comments: Comments, path: YamlPath, indent: int,
             lines: list[str], first_prefix: str | None = None) -> None:
    for i, (key, value) in enumerate(data.items()):
        child = (*path, key)
        pad = " " * indent
        lead = first_prefix if (i == 0 and first_prefix is not None) else pad
        if i > 0 or first_prefix is None:
            _comment(lines, comments, child, indent)
        if isinstance(value, dict) and value:
            lines.append(f"{lead}{key}:")
            _mapping(value, comments, child, indent + 2, lines)
        elif isinstance(value, list) and value:
            lines.append(f"{lead}{key}:")
            _sequence(value, comments, child, indent + 2, lines)
        else:
            lines.append(f"{lead}{key}: {scalar(value)}")


def _sequence(items: list[Any], comments: Comments, path: YamlPath, indent: int,
              lines: list[str]) -> None:
    pad = " " * indent
    for i, item in enumerate(items):
        child = (*path, i)
        _comment(lines, comments, child, indent)
        if isinstance(item, dict) and item:
            first_key = next(iter(item))
            _comment(lines, comments, (*child, first_key), indent)
            _mapping(item, comments, child, indent + 2, lines, first_prefix=f"{pad}- ")
        elif isinstance(item, list) and item:
            raise ValueError("nested lists are not used in cluster configs")
        else:
            lines.append(f"{pad}- {scalar(item)}")


def emit_yaml(data: dict[str, Any], comments: Comments | None = None,
              header: str = "") -> str:
    lines = [f"# {h}" if h else "#" for h in header.splitlines()] if header else []
    _mapping(data, comments or {}, (), 0, lines)
    return "\n".join(lines) + "\n"
