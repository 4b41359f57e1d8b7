"""``pctk config check``: YAML, placeholders, official schema and create-time validators
(aws-parallelcluster's own, offline), pctk lints, version drift."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolkit.config.drift import covered_by_drift, drift_findings, find_drift
from toolkit.config.findings import Finding, Level
from toolkit.config.linemap import LineMap, build_line_map
from toolkit.config.lints import run_lints
from toolkit.config.model import parse_cluster
from toolkit.config.placeholders import substitute
from toolkit.config.schema import parallelcluster_version
from toolkit.config.upstream import UpstreamReport, check_official
from toolkit.config.yamlio import YamlSyntaxError, compose_yaml_text, read_text
from toolkit.errors import PctkError


@dataclass
class CheckReport:
    source: str
    findings: list[Finding] = field(default_factory=list)
    usable: bool = True
    schema_version: str = ""
    data: Any = None
    upstream: UpstreamReport | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level is Level.ERROR]

    @property
    def exit_code(self) -> int:
        if not self.usable:
            return 2
        return 1 if self.errors else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.source,
            "valid": self.exit_code == 0,
            "usable": self.usable,
            "schema": f"aws-parallelcluster {self.schema_version}",
            "findings": [f.to_json(self.source) for f in self.findings],
            "validators": self.upstream.to_json() if self.upstream else None,
        }


def _with_lines(findings: list[Finding], lines: LineMap) -> list[Finding]:
    out = []
    for f in findings:
        if f.line is None:
            f = replace(f, line=lines.line_of(f.path))
        out.append(f)
    return out


def check_text(text: str, source: str = "<string>",
               variables: Mapping[str, str] | None = None,
               environ: Mapping[str, str] | None = None) -> CheckReport:
    """Check one config given as text. ``variables`` override ``environ`` for ``${VAR}``."""
    report = CheckReport(source, schema_version=parallelcluster_version())
    try:
        raw, node = compose_yaml_text(text, source)
    except YamlSyntaxError as exc:
        report.usable = False
        report.findings.append(Finding(Level.ERROR, "yaml", "yaml-syntax", (), exc.problem,
                                       exc.hint, exc.line, exc.column))
        return report
    if raw is None:
        report.usable = False
        report.findings.append(Finding(Level.ERROR, "yaml", "empty", (), "the file is empty",
                                       "pass a ParallelCluster cluster config"))
        return report
    lines = build_line_map(node)
    findings: list[Finding] = [
        Finding(Level.WARNING, "yaml", "duplicate-key", path,
                f"key {path[-1]!r} appears twice in the same mapping; the last one wins",
                "remove one of them", line)
        for path, line in lines.duplicate_keys
    ]
    values = {**(os.environ if environ is None else environ), **(variables or {})}
    data, unresolved = substitute(raw, values)
    findings += [
        Finding(Level.ERROR, "placeholders", "unresolved-placeholder", u.path,
                f"placeholder ${{{u.name}}} is not set",
                f"export {u.name}=... or pass --var {u.name}=...")
        for u in unresolved
    ]
    unresolved_paths = {u.path for u in unresolved}
    drift = find_drift(data)
    report.upstream = check_official(data)
    for f in report.upstream.findings:
        if f.path in unresolved_paths or covered_by_drift(f.path, drift):
            continue  # already reported as a placeholder or as version drift, with a fix
        findings.append(f)
    # the lints read the tolerant model: a field it cannot read is the schema's finding above
    findings += run_lints(parse_cluster(data, source, tolerant=True))
    findings += drift_findings(drift, report.schema_version)
    report.findings = _with_lines(findings, lines)
    report.data = data
    return report


def check_file(path: str | Path, variables: Mapping[str, str] | None = None,
               environ: Mapping[str, str] | None = None) -> CheckReport:
    """Check one file; a missing, oversized or undecodable file is an unusable report."""
    try:
        text = read_text(path)
    except PctkError as exc:
        report = CheckReport(str(path), usable=False, schema_version=parallelcluster_version())
        message = exc.message.removeprefix(f"{path}: ")  # the report names the file already
        report.findings.append(Finding(Level.ERROR, "yaml", "unreadable", (), message, exc.hint))
        return report
    return check_text(text, str(path), variables, environ)
