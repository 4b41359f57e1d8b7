"""A strict reader of the Prometheus text exposition format (0.0.4), enough for tests.

An independent check (not prometheus_client itself) of what node_exporter's textfile
collector needs: valid metric and label names, HELP/TYPE before a family's samples and at
most once, escaped label values, float values, no duplicate series, a final newline.
"""

from __future__ import annotations

import math
import re

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
SAMPLE = re.compile(rf"^({NAME})(?:\{{(.*)\}})? (\S+)(?: (-?\d+))?$")
LABEL_PAIR = re.compile(rf'\s*({LABEL})="((?:[^"\\\n]|\\[\\"n])*)"\s*(,|$)')
UNESCAPE = {"n": "\n", "\\": "\\", '"': '"'}
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class ExpositionError(ValueError):
    pass


def parse_labels(body: str, lineno: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        m = LABEL_PAIR.match(body, pos)
        if not m:
            raise ExpositionError(f"line {lineno}: bad label syntax near {body[pos:]!r}")
        name, raw = m[1], m[2]
        if name in labels:
            raise ExpositionError(f"line {lineno}: label {name} repeated")
        labels[name] = re.sub(r'\\(.)', lambda e: UNESCAPE[e[1]], raw)
        pos = m.end()
    return labels


def parse(text: str) -> dict[str, dict]:
    """``{family: {"help", "type", "samples": [(labels, value)]}}``; raises on any fault."""
    if text and not text.endswith("\n"):
        raise ExpositionError("the file must end with a newline")
    families: dict[str, dict] = {}
    seen: set[tuple[str, tuple]] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                if not re.fullmatch(NAME, parts[2]):
                    raise ExpositionError(f"line {lineno}: bad metric name {parts[2]!r}")
                fam = families.setdefault(parts[2], {"samples": []})
                key = parts[1].lower()
                if key in fam:
                    raise ExpositionError(f"line {lineno}: second {parts[1]} for {parts[2]}")
                if fam["samples"]:
                    raise ExpositionError(f"line {lineno}: {parts[1]} after samples")
                value = parts[3] if len(parts) > 3 else ""
                if key == "type" and value not in TYPES:
                    raise ExpositionError(f"line {lineno}: unknown type {value!r}")
                fam[key] = value
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ExpositionError(f"line {lineno}: not a sample: {line!r}")
        name, body, raw_value = m[1], m[2] or "", m[3]
        try:
            value = float(raw_value.replace("Inf", "inf"))
        except ValueError:
            raise ExpositionError(f"line {lineno}: bad value {raw_value!r}") from None
        if math.isnan(value) and raw_value != "NaN":
            raise ExpositionError(f"line {lineno}: write NaN as NaN")
        labels = parse_labels(body, lineno)
        series = (name, tuple(sorted(labels.items())))
        if series in seen:
            raise ExpositionError(f"line {lineno}: duplicate series {series}")
        seen.add(series)
        families.setdefault(name, {"samples": []})["samples"].append((labels, value))
    return families
