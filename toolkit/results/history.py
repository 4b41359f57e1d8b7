"""What ``pctk results trend`` shows: each series with its change points, as JSON or rows."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from benchmarks.record import check_created
from toolkit.results.changepoint import ChangePoint, CusumParams, change_points
from toolkit.results.store import ResultStore
from toolkit.results.trend import Series, build_series

RECENT_RUNS = 10
KINDS = ("nccl-tests", "collectives", "fsdp", "health", "storage", "scaling", "inference",
         "serving")
DEFAULT_PARAMS = CusumParams()


def load_series(store: ResultStore, kind: str | None = None, cluster: str | None = None,
                instance_type: str | None = None, since: str | None = None,
                metric: str | None = None) -> list[Series]:
    series = build_series(_records(store, kind, cluster, instance_type, since))
    return [s for s in series if metric is None or s.key.metric == metric]


def _records(store: ResultStore, kind: str | None, cluster: str | None,
             instance_type: str | None, since: str | None) -> Iterator[dict[str, Any]]:
    """The matching records one at a time (10,000 decoded records take ~500 MB at once)."""
    when = check_created(since) if since else None
    for each_kind in [kind] if kind else list(KINDS):
        for group in store.group_kinds(each_kind):
            if cluster not in (None, group[0]) or instance_type not in (None, group[1]):
                continue
            for record in store.newest_first(each_kind, *group):
                if when is not None and check_created(record["created"]) < when:
                    break  # newest first: the rest are older still
                yield record


def series_json(series: Series, found: list[ChangePoint]) -> dict[str, Any]:
    values = series.values
    return {
        **series.key.to_json(), "label": series.key.label(), "runs": len(values),
        "first": series.points[0].created, "last": series.points[-1].created,
        "latest": values[-1], "recent_median": statistics.median(values[-RECENT_RUNS:]),
        "points": [{"id": p.result_id, "created": p.created, "value": p.value,
                    "status": p.status} for p in series.points],
        "change_points": [{**asdict(cp), "changes": [asdict(c) for c in cp.changes]}
                          for cp in found],
    }


def trend_json(series: list[Series], params: CusumParams = DEFAULT_PARAMS) -> dict[str, Any]:
    return {"method": params.describe(),
            "series": [series_json(s, change_points(s, params)) for s in series]}


def describe_change_point(cp: dict[str, Any]) -> str:
    """One line from a change point of :func:`trend_json`."""
    size = f"{cp['change']:+.1%}" if cp["change"] is not None else "n/a"
    what = "; ".join(f"{c['item']} {c['before'] or '-'} -> {c['after'] or '-'} "
                     f"(in {c['result_id'][:12]})" for c in cp["changes"])
    return (f"{cp['created']} {cp['result_id'][:12]}: {cp['before']:,.4g} -> "
            f"{cp['after']:,.4g} ({size}); {what or 'nothing recorded changed'}")
