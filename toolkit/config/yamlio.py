"""Safe YAML loading with errors that point at the line.

Only plain YAML is accepted (``yaml.SafeLoader``: no ``!!python/object`` tags); oversized or
absurdly nested documents are refused before they can exhaust memory.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import yaml

from toolkit import fsutil
from toolkit.errors import PctkError

MAX_BYTES = 5 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 200_000


class YamlSyntaxError(PctkError):
    """Unparseable or refused YAML, with the 1-based line and column where known."""

    def __init__(self, message: str, hint: str | None = None, *,
                 line: int | None = None, column: int | None = None, problem: str = ""):
        super().__init__(message, hint)
        self.line = line
        self.column = column
        self.problem = problem or message


def _depth(node: yaml.Node, limit: int) -> int:
    """Nesting depth, capped: stops early past ``limit`` or past MAX_NODES expanded nodes.

    Aliases make the node graph a DAG whose expansion can be exponential ("billion laughs"),
    so a document that expands past MAX_NODES counts as too deep as well.
    """
    stack: list[tuple[yaml.Node, int]] = [(node, 1)]
    deepest = 0
    visited = 0
    while stack:
        cur, d = stack.pop()
        visited += 1
        deepest = max(deepest, d)
        if deepest > limit or visited > MAX_NODES:
            return limit + 1
        if isinstance(cur, yaml.MappingNode):
            for k, v in cur.value:
                stack.append((k, d + 1))
                stack.append((v, d + 1))
        elif isinstance(cur, yaml.SequenceNode):
            stack.extend((v, d + 1) for v in cur.value)
    return deepest


def read_regular_bytes(path: str | Path, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of a regular file; anything else is a one-line PctkError.

    A FIFO would block ``open`` and ``/dev/zero`` never ends (its ``st_size`` is 0), so
    :func:`toolkit.fsutil.read_regular_bytes` checks the file kind before reading and stops
    one byte past the cap whatever ``st_size`` says.
    """
    p = Path(path)
    try:
        return fsutil.read_regular_bytes(p, max_bytes)
    except FileNotFoundError:
        raise PctkError(f"{p}: no such file", "check the path") from None
    except IsADirectoryError:
        raise PctkError(f"{p}: is a folder, not a YAML file") from None
    except fsutil.NotRegularFile as exc:
        if "directory" in str(exc):
            raise PctkError(f"{p}: is a folder, not a YAML file") from None
        raise PctkError(f"{exc}; refused", "save the config to a file and pass that") from None
    except fsutil.InputTooLarge:
        raise PctkError(f"{p}: larger than the {max_bytes} bytes a cluster config may be",
                        "pass the ParallelCluster YAML itself") from None
    except OSError as exc:
        raise PctkError(f"{p}: cannot read ({exc.strerror})",
                        "check the file's permissions" if exc.errno == errno.EACCES else None
                        ) from None


def read_text(path: str | Path) -> str:
    data = read_regular_bytes(path, MAX_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PctkError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def load_yaml_text(text: str, name: str = "<string>") -> Any:
    """Parse YAML safely; raise PctkError naming ``name:line:column`` on any problem."""
    return compose_yaml_text(text, name)[0]


def load_yaml(path: str | Path) -> Any:
    return load_yaml_text(read_text(path), str(path))


def compose_yaml_text(text: str, name: str = "<string>") -> tuple[Any, yaml.Node | None]:
    """Parse YAML safely and return ``(data, root node)``; the node feeds a line map.

    Refuses YAML tags, deep nesting and alias bombs; errors are :class:`YamlSyntaxError`.
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = f"YAML syntax error: {exc.problem or exc.context}"
        raise YamlSyntaxError(
            f"{where}: {problem}",
            "fix the YAML at that line (indentation, quotes, a missing ':')",
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            problem=problem,
        ) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(f"{name}: YAML error: {exc}") from None
    except RecursionError:
        # PyYAML's composer recurses once per nesting level: 100,000 '[' exhaust the stack
        raise YamlSyntaxError(f"{name}: YAML nested too deeply to parse; refused",
                              problem="YAML nested too deeply to parse; refused") from None
    if node is None:
        return None, None
    if _depth(node, MAX_DEPTH) > MAX_DEPTH:
        raise YamlSyntaxError(
            f"{name}: YAML nested deeper than {MAX_DEPTH} levels or expanding to more than "
            f"{MAX_NODES} nodes; refused",
            line=node.start_mark.line + 1,
        )
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node), node
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        raise YamlSyntaxError(
            f"{where}: unsupported YAML tag ({exc.problem})",
            "ParallelCluster configs are plain YAML; remove the tag",
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
            problem=f"unsupported YAML tag ({exc.problem})",
        ) from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise YamlSyntaxError(f"{name}: YAML error: {exc}") from None
    finally:
        loader.dispose()
