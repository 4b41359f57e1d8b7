"""Trend charts for the report: one series over time, the catalog expectation as bands, each
change point as a dashed line with its size.

Built like :mod:`toolkit.results.plots` (a bare ``Figure`` on the Agg canvas, no pyplot).
"""

from __future__ import annotations

from matplotlib import dates as mdates
from matplotlib.figure import Figure

from benchmarks.record import check_created
from toolkit.results import plots
from toolkit.results.changepoint import ChangePoint
from toolkit.results.trend import Series

WARN_BAND = "#fff8c5"
PASS_BAND = "#dafbe1"


def trend_chart(series: Series, expected: plots.Expected | None,
                found: list[ChangePoint]) -> str:
    fig = Figure(figsize=(6.4, 2.8))
    ax = fig.add_subplot()
    times = [check_created(p.created) for p in series.points]
    xs = mdates.date2num(times)
    ax.plot(xs, series.values, marker="o", markersize=2.5, linewidth=1,
            color=plots.CURRENT_COLOR, label=series.key.metric)
    if expected is not None:
        _bands(ax, expected, series.values)
    for cp in found:
        x = mdates.date2num(check_created(cp.created))
        ax.axvline(x, linestyle="--", linewidth=1.2, color=plots.FAIL_COLOR)
        size = f"{cp.change:+.1%}" if cp.change is not None else "shift"
        ax.annotate(size, (x, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -10),
                    textcoords="offset points", fontsize=7, color=plots.FAIL_COLOR)
    plots.time_axis(ax, times, maxticks=7)
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, alpha=0.3)
    ax.set_title(series.key.label(), fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    return plots.png_data_uri(fig)


def _bands(ax, expected: plots.Expected, values: list[float]) -> None:
    """The verdict's zones: PASS from warn_below x catalog up, WARN down to fail_below."""
    top = max([*values, expected.gbps]) * 1.05
    warn, fail = expected.gbps * expected.warn_below, expected.gbps * expected.fail_below
    ax.axhspan(warn, top, color=PASS_BAND, alpha=0.6, linewidth=0,
               label=f"PASS (>= {expected.warn_below:.0%} of {expected.label})")
    ax.axhspan(fail, warn, color=WARN_BAND, alpha=0.8, linewidth=0,
               label=f"WARN (>= {expected.fail_below:.0%})")
    ax.axhline(expected.gbps, color=plots.EXPECTED_COLOR, linewidth=1)
    low = min([*values, fail])
    ax.set_ylim(low - (top - low) * 0.05, top)
