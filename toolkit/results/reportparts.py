"""The pieces the report and its "Trends" section share: HTML escaping, tables and cells,
and the catalog expectation a busbw chart is drawn against (:mod:`toolkit.results.report`
imports :mod:`toolkit.results.trendreport`, and both import this module)."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from benchmarks.bands import BUSBW
from toolkit.bench.comm.verdict import lookup_expectation
from toolkit.results import metrics as m
from toolkit.results import plots


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def table(headers: Iterable[str] | None, rows: Iterable[Iterable[str]]) -> str:
    """Cells are HTML already (escape on the way in); no header row when ``headers`` is None."""
    head = ("<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr></thead>"
            if headers is not None else "")
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    return f"<table>{head}<tbody>{body}</tbody></table>"


def td(value: Any, css: str = "", title: str = "") -> str:
    attrs = (f' class="{esc(css)}"' if css else "") + (f' title="{esc(title)}"' if title else "")
    return f"<td{attrs}>{esc(value)}</td>"


def expected_busbw(record: dict[str, Any], collective: str,
                   points: list[m.BusbwPoint]) -> plots.Expected | None:
    """The catalog expectation the verdict used: same lookup, same instance type and nodes."""
    cluster = record.get("cluster") or {}
    block = m.collective_sections(record.get("metrics") or {}).get(collective) or {}
    hosts = block.get("hosts")
    nodes = cluster.get("nodes") or (len(hosts) if isinstance(hosts, list) else 0) or None
    exp = lookup_expectation(cluster.get("instance_type"), nodes, collective,
                             max((p.size for p in points), default=None))
    if exp is None:
        return None
    source = exp.source.split(":", 1)[0]
    at = f" at >= {m.format_size(exp.size_bytes)}" if exp.size_bytes else ""
    return plots.Expected(exp.gbps, exp.size_bytes, f"catalog {exp.gbps:g} GB/s{at} ({source})",
                          BUSBW.warn_below, BUSBW.fail_below)
