"""Automatic baselines: a run judged against the recent history of its own series.

Where no baseline was set by hand, each figure of a run is compared with the median of the
last ``window`` passing runs (verdict PASS) of the same cluster, instance type, node count
and figure (:mod:`toolkit.results.trend`), taken before it. The spread is the MAD scaled to
sigma. A drop is a regression when it is larger than both the threshold and
``spread_factor`` spreads, so a noisy series needs a bigger drop before it alarms and a
quiet one is held to the threshold. Fewer than ``min_runs`` earlier passing runs: no
judgement, a note says so.

Health runs are compared with the latest earlier passing health run of the same group (a
node/check that FAILs now and did not then), as a manual baseline would be.

A manual baseline (``pctk results baseline ID``) always wins: see :func:`judge`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from toolkit.results import compare as c
from toolkit.results import metrics as m
from toolkit.results.changepoint import robust_reference
from toolkit.results.store import ResultStore, group_key
from toolkit.results.trend import node_count, record_figures, run_order

# What a manual baseline judges too (toolkit.results.compare): busbw, training and the
# storage benchmark's figures; the fsdp checkpoint GB/s are followed by `pctk results trend`
# but not judged.
JUDGED_METRICS = ("busbw_GBps", "tokens_per_s_per_gpu", "mfu",
                  *(f"{phase}_{figure}" for phase, figure in m.STORAGE_FIGURES))


@dataclass(frozen=True)
class AutoParams:
    window: int = 10
    min_runs: int = 3
    spread_factor: float = 3.0
    min_rel_spread: float = 0.0  # the threshold already sets the smallest drop that counts

    def describe(self) -> str:
        return (f"median of the last {self.window} passing runs of the same series "
                f"(at least {self.min_runs}); a drop counts beyond the threshold and "
                f"{self.spread_factor:g} x MAD-sigma")


def same_series_before(current: dict[str, Any], history: Iterable[dict[str, Any]],
                       limit: int | None = None) -> list[dict[str, Any]]:
    """Earlier passing runs of the same kind, group and node count, oldest first; with
    ``limit``, the newest ``limit`` of them (``history`` newest first reads no further)."""
    key = (current["kind"], group_key(current), node_count(current))
    when = run_order(current)
    matching = (r for r in history
                if (r["kind"], group_key(r), node_count(r)) == key
                and run_order(r) < when and r["verdict"]["status"] == "PASS")
    if limit is None:
        return sorted(matching, key=run_order)
    return sorted(islice(matching, limit), key=run_order)


def auto_compare(current: dict[str, Any], history: Iterable[dict[str, Any]],
                 threshold: float = c.DEFAULT_THRESHOLD,
                 params: AutoParams = AutoParams(), limit: int | None = None
                 ) -> c.Comparison:
    """Judge ``current`` against its series in ``history`` (any records, any order; with
    ``limit``, newest first, and only the first ``limit`` matching runs are read)."""
    cluster, instance_type = group_key(current)
    passing = same_series_before(current, history, limit)
    out = c.Comparison(current["kind"], cluster, instance_type, current["id"],
                       "automatic", threshold, basis=params.describe())
    if current["kind"] == "health":
        if passing:
            out.baseline_id = passing[-1]["id"]
            c.compare_health(current, passing[-1], out)
        else:
            out.notes.append("no earlier passing health run of this group to compare with")
        return out
    _compare_figures(current, passing, threshold, params, out)
    if not out.points and not out.notes:
        out.notes.append("nothing in this record has a series to compare with")
    return out


def _compare_figures(current: dict[str, Any], passing: list[dict[str, Any]], threshold: float,
                     params: AutoParams, out: c.Comparison) -> None:
    earlier: dict[tuple[str, str], list[float]] = {}
    for record in passing:
        for metric, where, value in record_figures(record):
            earlier.setdefault((metric, where), []).append(value)
    for metric, where, value in record_figures(current):
        if metric not in JUDGED_METRICS:
            continue
        values = earlier.get((metric, where), [])[-params.window:]
        label = where or "run summary"
        if len(values) < params.min_runs:
            out.notes.append(f"{metric} {label}: {len(values)} earlier passing run(s), "
                             f"{params.min_runs} needed for an automatic baseline")
            continue
        ref = robust_reference(values, params.min_rel_spread)
        change = (value - ref.median) / ref.median if ref.median else None
        limit = max(threshold, params.spread_factor * ref.spread / abs(ref.median)
                    if ref.median else threshold)
        out.points.append(c.Point(
            metric=metric, where=f"{label} (median of {ref.runs} runs, "
                                 f"spread {ref.spread / abs(ref.median or 1):.1%})",
            baseline=ref.median, current=value, change=change,
            regression=change is not None and change < -limit))


def judge(store: ResultStore, current: dict[str, Any],
          threshold: float = c.DEFAULT_THRESHOLD, params: AutoParams = AutoParams()
          ) -> c.Comparison:
    """Against the manual baseline of the group where one is set, else automatically."""
    manual = store.baseline(*group_key(current), current["kind"])
    if manual is not None:
        return c.compare_records(current, manual, threshold)
    history = store.newest_first(current["kind"], *group_key(current))
    return auto_compare(current, history, threshold, params, limit=params.window)


def latest_of_each_group(store: ResultStore, kind: str) -> list[dict[str, Any]]:
    """What ``store.latest`` returns, reading one record per group instead of all."""
    found = (next(store.newest_first(kind, *group), None) for group in store.group_kinds(kind))
    return [record for record in found if record is not None]
