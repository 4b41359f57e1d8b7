"""YAML path -> line map, built from ``yaml.compose`` nodes so findings can name the line."""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from toolkit.config.findings import YamlPath


@dataclass
class LineMap:
    """Where each value (and each mapping key) starts in the source text (1-based)."""

    values: dict[YamlPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[YamlPath, tuple[int, int]] = field(default_factory=dict)
    duplicate_keys: list[tuple[YamlPath, int]] = field(default_factory=list)

    def line_of(self, path: YamlPath) -> int | None:
        """The line of ``path``, or of its nearest ancestor the map knows."""
        p = tuple(path)
        while True:
            if p in self.keys:
                return self.keys[p][0]
            if p in self.values:
                return self.values[p][0]
            if not p:
                return None
            p = p[:-1]


def build_line_map(root: yaml.Node | None) -> LineMap:
    lines = LineMap()
    if root is None:
        return lines
    stack: list[tuple[yaml.Node, YamlPath]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        lines.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                key = str(key_node.value)
                child = (*path, key)
                if key in seen:
                    lines.duplicate_keys.append((child, key_node.start_mark.line + 1))
                seen.add(key)
                lines.keys[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                stack.append((value_node, child))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in enumerate(node.value))
    return lines
