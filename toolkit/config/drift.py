"""Version drift: configs written for older ParallelCluster releases that 3.16 rejects.

Each rule knows one change, how to spot it in a raw config and the line edit that fixes it,
so ``pctk config upgrade`` can rewrite the file while keeping comments and layout.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from toolkit.config.findings import Finding, Level, YamlPath, format_path
from toolkit.config.linemap import LineMap, build_line_map
from toolkit.config.model import dig
from toolkit.config.yamlio import compose_yaml_text
from toolkit.errors import PctkError

# Image.Os values older releases accepted -> the closest OS the current schema supports
OS_REPLACEMENTS = {
    "alinux2": "alinux2023",
    "centos7": "rocky8",
    "ubuntu1804": "ubuntu2204",
    "ubuntu2004": "ubuntu2204",
}


@dataclass(frozen=True)
class DriftIssue:
    path: YamlPath
    message: str
    fix: str
    new_value: str | None  # None: delete the key


def supported_oses() -> list[str]:
    from pcluster.constants import SUPPORTED_OSES

    return list(SUPPORTED_OSES)


def find_drift(data: Any) -> list[DriftIssue]:
    return list(_os_drift(data)) + list(_login_key_drift(data))


def _os_drift(data: Any) -> Iterator[DriftIssue]:
    os_name = dig(data, "Image", "Os")
    if isinstance(os_name, str) and os_name in OS_REPLACEMENTS and os_name not in supported_oses():
        new = OS_REPLACEMENTS[os_name]
        yield DriftIssue(
            ("Image", "Os"),
            f"Os {os_name} is no longer supported (this schema accepts "
            f"{', '.join(supported_oses())})",
            f"Os: {new} (custom AMIs and OS-specific bootstrap scripts need a rebuild)",
            new,
        )


def _login_key_drift(data: Any) -> Iterator[DriftIssue]:
    pools = dig(data, "LoginNodes", "Pools")
    for pi, pool in enumerate(pools if isinstance(pools, list) else []):
        if isinstance(dig(pool, "Ssh"), dict) and "KeyName" in pool["Ssh"]:
            yield DriftIssue(
                ("LoginNodes", "Pools", pi, "Ssh", "KeyName"),
                "KeyName under LoginNodes is no longer supported since ParallelCluster 3.15 "
                "(login nodes use the head node's key)",
                "remove LoginNodes/Pools/Ssh/KeyName",
                None,
            )


def drift_findings(issues: list[DriftIssue], version: str) -> list[Finding]:
    return [
        Finding(Level.ERROR, "drift", "version-drift", issue.path,
                f"written for an older ParallelCluster: {issue.message}; rejected by the "
                f"aws-parallelcluster {version} schema",
                f"{issue.fix}; `pctk config upgrade` rewrites this")
        for issue in issues
    ]


def covered_by_drift(path: YamlPath, issues: list[DriftIssue]) -> bool:
    """True if a schema finding at ``path`` is the symptom of a known drift issue."""
    return any(path == i.path or (path and path == i.path[: len(path)] and len(path) >= 2)
               for i in issues)


_SCALAR_AFTER_COLON = re.compile(r"^(?P<head>\s*(?:-\s+)?[^:#]+:\s*)(?P<value>[^#\s][^#]*?)"
                                 r"(?P<tail>\s*(?:#.*)?)$")


def _key_line(lines: LineMap, path: YamlPath) -> int:
    if path not in lines.keys or lines.keys[path][0] != lines.values.get(path, (0, 0))[0]:
        raise PctkError(f"{format_path(path)}: cannot rewrite a multi-line value",
                        "edit this key by hand")
    return lines.keys[path][0]


def apply_upgrade(text: str, name: str = "<string>") -> tuple[str, list[DriftIssue]]:
    """Rewrite the known drift cases line by line (comments stay); return text and changes."""
    data, node = compose_yaml_text(text, name)
    issues = find_drift(data)
    if not issues:
        return text, []
    lines = build_line_map(node)
    out = text.splitlines(keepends=True)
    deletions: set[int] = set()
    for issue in issues:
        lineno = _key_line(lines, issue.path)
        if issue.new_value is not None:
            m = _SCALAR_AFTER_COLON.match(out[lineno - 1].rstrip("\n"))
            if not m:
                raise PctkError(f"{name}:{lineno}: cannot rewrite this line", "edit it by hand")
            newline = "\n" if out[lineno - 1].endswith("\n") else ""
            out[lineno - 1] = m.group("head") + issue.new_value + m.group("tail") + newline
        else:
            deletions.add(lineno)
            parent = issue.path[:-1]
            siblings = dig(data, *parent)
            # an Ssh mapping left empty would be `Ssh:` = null, which the schema rejects
            if isinstance(siblings, dict) and set(siblings) == {issue.path[-1]}:
                deletions.add(_parent_key_line(lines, parent))
    new_text = "".join(line for i, line in enumerate(out, 1) if i not in deletions)
    remaining = find_drift(compose_yaml_text(new_text, name)[0])
    if remaining:
        raise PctkError(f"{name}: upgrade left {len(remaining)} issue(s) unfixed",
                        "edit them by hand: " + "; ".join(i.fix for i in remaining))
    return new_text, issues


def _parent_key_line(lines: LineMap, path: YamlPath) -> int:
    if path not in lines.keys:
        raise PctkError(f"{format_path(path)}: cannot locate this key", "edit it by hand")
    return lines.keys[path][0]
