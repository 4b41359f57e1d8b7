"""``${VAR}`` placeholders (envsubst templates): fill them in, list what stays unresolved."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from toolkit.config.findings import YamlPath
from toolkit.errors import PctkError

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Unresolved:
    name: str
    path: YamlPath


def parse_var_assignments(pairs: list[str]) -> dict[str, str]:
    """``["K=V", ...]`` from ``--var`` options -> ``{"K": "V"}``."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise PctkError(f"--var {pair!r} is not NAME=VALUE", "e.g. --var SUBNET_ID=subnet-0abc")
        out[key] = value
    return out


def _fill_scalar(text: str, values: Mapping[str, str]) -> Any:
    filled = PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)
    whole = PLACEHOLDER.fullmatch(text)
    if whole and whole.group(1) in values and "\n" not in filled:
        # envsubst works on text, so `MinCount: ${N}` becomes an int after parsing
        try:
            parsed = yaml.safe_load(filled)
        except yaml.YAMLError:
            return filled
        if isinstance(parsed, (str, int, float, bool)):
            return parsed
    return filled


def substitute(data: Any, values: Mapping[str, str]) -> tuple[Any, list[Unresolved]]:
    """A copy of ``data`` with placeholders filled from ``values``; the unresolved ones."""
    unresolved: list[Unresolved] = []

    def walk(node: Any, path: YamlPath) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, (*path, str(k))) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, (*path, i)) for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            unresolved.extend(
                Unresolved(m.group(1), path)
                for m in PLACEHOLDER.finditer(node)
                if m.group(1) not in values
            )
            return _fill_scalar(node, values)
        return node

    return walk(data, ()), unresolved
