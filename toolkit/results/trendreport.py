"""The report's "Trends" section: each series over time with its change points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolkit.results import metrics as m
from toolkit.results import reportparts as r
from toolkit.results.changepoint import ChangePoint, CusumParams, change_points
from toolkit.results.trend import Series
from toolkit.results.trendplots import trend_chart

DEFAULT_PARAMS = CusumParams()
MAX_PLOTS = 48  # beyond this the series are listed, not drawn (each plot is ~30 KB)


def _expected(series: Series, record_of: Callable[[str], dict[str, Any]]) -> Any:
    if series.key.metric != "busbw_GBps":
        return None
    latest = record_of(series.points[-1].result_id)
    collective = series.key.where.split(" @ ")[0]
    points = m.busbw_curves(latest, comparable_only=True).get(collective) or []
    return r.expected_busbw(latest, collective, points) if points else None


def _change_rows(series: Series, found: list[ChangePoint]) -> list[list[str]]:
    rows = []
    for cp in found:
        what = "; ".join(f"{c.item}: {c.before or '—'} → {c.after or '—'} "
                         f"({c.created})" for c in cp.changes) or "nothing recorded changed"
        size = f"{cp.change * 100:+.1f}%" if cp.change is not None else "—"
        rows.append([r.td(series.key.label()), r.td(cp.created), r.td(cp.result_id[:12]),
                     r.td(f"{cp.before:,.4g} → {cp.after:,.4g}", "num"),
                     r.td(size, "FAIL" if (cp.change or 0) < 0 else "OK"), r.td(what)])
    return rows


def trends_section(all_series: list[Series], record_of: Callable[[str], dict[str, Any]],
                   params: CusumParams = DEFAULT_PARAMS) -> str:
    """``record_of``: the record of a result id (the latest run of a busbw series, for its
    catalog band)."""
    series = [s for s in all_series if len(s.points) >= 2]
    if not series:
        return '<p class="empty">fewer than two runs of any series: no trends yet</p>'
    images, rows = [], []
    for index, item in enumerate(series):
        found = change_points(item, params)
        rows += _change_rows(item, found)
        if index < MAX_PLOTS:
            alt = f"{item.key.label()} over {len(item.points)} runs, {len(found)} change point(s)"
            uri = trend_chart(item, _expected(item, record_of), found)
            images.append(f'<img src="{uri}" alt="{r.esc(alt)}" '
                          f'data-points="{len(item.points)}">')
    note = (f'<p class="meta">{len(series) - MAX_PLOTS} more series not drawn; see '
            "<code>pctk results trend</code></p>" if len(series) > MAX_PLOTS else "")
    changes = (r.table(["series", "first run of the shift", "result", "level", "change",
                        "what changed around it"], rows) if rows
               else '<p class="OK">no sustained shift in any series</p>')
    return (f'<p class="meta">change points: {r.esc(params.describe())}</p>' + changes
            + f'<div class="plots">{"".join(images)}</div>' + note)
