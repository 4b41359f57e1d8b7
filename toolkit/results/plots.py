"""Charts for the HTML report, rendered with matplotlib's Agg canvas into PNG bytes.

Figures are built directly (``Figure`` + ``FigureCanvasAgg``) rather than through pyplot, so
no global backend or figure registry is touched and nothing needs a display.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
from collections.abc import Sequence

from matplotlib import dates as mdates
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from toolkit.results import metrics as m

CURRENT_COLOR = "#1f6feb"
BASELINE_COLOR = "#8b949e"
DPI = 100


def png_data_uri(fig: Figure) -> str:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def busbw_chart(collective: str, current: Sequence[m.BusbwPoint],
                baseline: Sequence[m.BusbwPoint] | None, title: str) -> str:
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    ax.plot([p.size for p in current], [p.busbw for p in current], marker="o",
            markersize=3, color=CURRENT_COLOR, label="latest")
    if baseline:
        ax.plot([p.size for p in baseline], [p.busbw for p in baseline], linestyle="--",
                marker="x", markersize=3, color=BASELINE_COLOR, label="baseline")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: m.format_size(int(x))))
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.set_xlabel("message size")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{collective} — {title}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return png_data_uri(fig)


TimeSeries = dict[str, list[tuple[dt.datetime, float]]]


def training_over_time(tokens: TimeSeries, mfu: TimeSeries,
                       baselines: dict[str, tuple[float | None, float | None]]) -> str:
    """Two panels, tokens/s per GPU and MFU (%), one line per cluster / instance type."""
    fig = Figure(figsize=(9.0, 3.4))
    panels = (fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2))
    for index, (ax, series, label) in enumerate(
        ((panels[0], tokens, "tokens/s per GPU"), (panels[1], mfu, "MFU (%)"))
    ):
        for group, points in sorted(series.items()):
            points = sorted(points)
            values = [v * 100 if index else v for _, v in points]
            line = ax.plot(mdates.date2num([t for t, _ in points]), values, marker="o",
                           markersize=3, label=group)[0]
            base = baselines.get(group, (None, None))[index]
            if base is not None:
                ax.axhline(base * 100 if index else base, linestyle="--", linewidth=1,
                           color=line.get_color(), alpha=0.7)
        ax.xaxis_date()
        ax.set_title(label + " (dashed: baseline)", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        if series:
            ax.legend(fontsize=7)
    fig.autofmt_xdate()
    return png_data_uri(fig)


def loss_chart(curves: dict[str, list[tuple[int, float]]]) -> str:
    fig = Figure(figsize=(6.4, 3.0))
    ax = fig.add_subplot()
    for group, points in sorted(curves.items()):
        ax.plot([s for s, _ in points], [v for _, v in points], label=group)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("loss of the latest training run", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return png_data_uri(fig)
