"""Axes a reader can use: trend ticks that tell runs of one day apart (they all read the same
date), whole node counts on the storage plot (its axis ran 3.80-4.20 nodes)."""

from __future__ import annotations

from typing import Any

import pytest
from matplotlib.figure import Figure

from toolkit.results import plots
from toolkit.results.trend import build_series
from toolkit.results.trendplots import trend_chart

from . import records


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the charts draw, kept instead of encoded."""
    kept: list[Figure] = []

    def keep(fig: Figure) -> str:
        kept.append(fig)
        fig.canvas.draw()
        return "data:image/png;base64,"

    monkeypatch.setattr(plots, "png_data_uri", keep)
    return kept


def _xticks(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]


def test_trend_ticks_of_one_day_tell_the_runs_apart(figures: list[Figure]) -> None:
    history = [records.nccl_record(created=f"2026-12-04T{9 + i:02d}:15:00Z") for i in range(5)]
    (series,) = [s for s in build_series(history)
                 if s.key.where == "all_reduce @ 16 GiB" and s.key.metric == "busbw_GBps"]
    trend_chart(series, None, [])
    ticks = _xticks(figures[-1])
    assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), ticks
    assert all(":" in t for t in ticks)  # hours and minutes
    assert figures[-1].axes[0].get_xlabel() == "2026-12-04 (UTC)"


def test_trend_ticks_over_months_are_dates(figures: list[Figure]) -> None:
    history = [records.nccl_record(created=f"2026-{m:02d}-01T02:00:00Z") for m in range(1, 7)]
    (series,) = [s for s in build_series(history)
                 if s.key.where == "all_reduce @ 16 GiB" and s.key.metric == "busbw_GBps"]
    trend_chart(series, None, [])
    ticks = _xticks(figures[-1])
    assert len(set(ticks)) == len(ticks) >= 2 and all(t.startswith("2026-") for t in ticks)


@pytest.mark.parametrize(("series", "expected"), [
    ({"seq_write": [(4, 900.0)], "seq_read": [(4, 1200.0)]}, ["4"]),
    ({"seq_write": [(1, 300.0), (2, 580.0), (4, 900.0)]}, ["1", "2", "4"]),
])
def test_storage_plot_ticks_are_whole_nodes(figures: list[Figure], series: dict[str, Any],
                                            expected: list[str]) -> None:
    plots.storage_scaling(series, "storage")
    assert _xticks(figures[-1]) == expected
    lo, hi = figures[-1].axes[0].get_xlim()
    assert (lo, hi) == (float(expected[0]) - 0.5, float(expected[-1]) + 0.5)
