"""Charts for the HTML report, rendered with matplotlib's Agg canvas into PNG bytes.

Figures are built directly (``Figure`` + ``FigureCanvasAgg``) rather than through pyplot, so
no global backend or figure registry is touched and nothing needs a display.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib import dates as mdates
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

from toolkit.results import metrics as m
from toolkit.twinnote import twin_caveat

CURRENT_COLOR = "#1f6feb"
BASELINE_COLOR = "#8b949e"
EXPECTED_COLOR = "#1a7f37"
FAIL_COLOR = "#cf222e"
DPI = 100


def png_data_uri(fig: Figure) -> str:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


@dataclass(frozen=True)
class Expected:
    """The catalog figure a busbw curve was judged against (see toolkit.bench.comm.verdict)."""

    gbps: float
    size_bytes: int | None  # judged at sizes >= this; None: at every size
    label: str  # e.g. "catalog 487.1 GB/s (S8a)"
    warn_below: float  # fractions of gbps under which the verdict is WARN / FAIL
    fail_below: float


def busbw_chart(collective: str, current: Sequence[m.BusbwPoint],
                baseline: Sequence[m.BusbwPoint] | None, title: str,
                expected: Expected | None = None) -> str:
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    ax.plot([p.size for p in current], [p.busbw for p in current], marker="o",
            markersize=3, color=CURRENT_COLOR, label="latest")
    if baseline:
        ax.plot([p.size for p in baseline], [p.busbw for p in baseline], linestyle="--",
                marker="x", markersize=3, color=BASELINE_COLOR, label="baseline")
    if expected and current:
        _expectation(ax, expected, [p.size for p in current])
    else:
        ax.text(0.99, 0.02, "no catalog expectation for this run", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=7, color=BASELINE_COLOR)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: m.format_size(int(x))))
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.set_xlabel("message size")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{collective} — {title}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return png_data_uri(fig)


def _expectation(ax, expected: Expected, sizes: list[int]) -> None:
    """The catalog figure as a line, the PASS band under it, the FAIL threshold dotted, and
    where judging starts (the figure's message size) as a vertical mark."""
    top = expected.gbps
    ax.axhspan(top * expected.warn_below, top, color=EXPECTED_COLOR, alpha=0.12,
               label=f"PASS band (>= {expected.warn_below:.0%})")
    ax.axhline(top, color=EXPECTED_COLOR, linewidth=1.5, label=expected.label)
    ax.axhline(top * expected.fail_below, color=FAIL_COLOR, linewidth=1, linestyle=":",
               label=f"FAIL below {expected.fail_below:.0%}")
    if expected.size_bytes and min(sizes) < expected.size_bytes:
        ax.axvline(expected.size_bytes, color=EXPECTED_COLOR, linewidth=1, linestyle="--",
                   alpha=0.6)


TimeSeries = dict[str, list[tuple[dt.datetime, float]]]


def training_over_time(tokens: TimeSeries, mfu: TimeSeries,
                       baselines: dict[str, tuple[float | None, float | None]]) -> str:
    """tokens/s per GPU and MFU (%) over time, one line with markers per cluster / type.

    Without any MFU value (no published peak for the device) the MFU panel is left out
    rather than drawn empty; the caller says why.
    """
    panels = [(tokens, "tokens/s per GPU", 1.0, 0)]
    if mfu:
        panels.append((mfu, "MFU (%)", 100.0, 1))
    fig = Figure(figsize=(4.8 * len(panels) + 0.6, 3.6))
    for column, (series, label, scale, index) in enumerate(panels, start=1):
        ax = fig.add_subplot(1, len(panels), column)
        _time_panel(ax, series, scale, {g: b[index] for g, b in baselines.items()})
        ax.set_title(label + (" (dashed: baseline)" if any(
            b[index] is not None for b in baselines.values()) else ""), fontsize=10)
    fig.tight_layout()
    return png_data_uri(fig)


def _time_panel(ax, series: TimeSeries, scale: float, baselines: dict[str, float | None]
                ) -> None:
    times = [t for points in series.values() for t, _ in points]
    few = sum(len(points) for points in series.values()) <= 12
    for group, points in sorted(series.items()):
        points = sorted(points)
        xs = mdates.date2num([t for t, _ in points])
        values = [v * scale for _, v in points]
        line = ax.plot(xs, values, marker="o", markersize=7, linewidth=1.8, label=group)[0]
        if few:  # with a handful of runs the numbers themselves are the point
            for i, (x, v) in enumerate(zip(xs, values, strict=True)):
                # alternate above/below so neighbouring labels do not overlap
                ax.annotate(f"{v:,.4g}", (x, v), textcoords="offset points",
                            xytext=(0, 7 if i % 2 == 0 else -13), ha="center", fontsize=7,
                            color=line.get_color())
        base = baselines.get(group)
        if base is not None:
            ax.axhline(base * scale, linestyle="--", linewidth=1, color=line.get_color(),
                       alpha=0.7)
    time_axis(ax, times, maxticks=6)
    ax.margins(y=0.25)
    ax.grid(True, alpha=0.3)
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    if series:
        ax.legend(fontsize=7)


def time_axis(ax, times: Sequence[dt.datetime], maxticks: int = 6) -> None:
    """Date ticks that tell the runs apart: hours and minutes (the date under the axis) when
    all runs fall on one day, month-day and time within a few weeks, dates beyond."""
    if not times:
        return
    lo, hi = min(times), max(times)
    pad = max((hi - lo) * 0.08, dt.timedelta(minutes=30))
    ax.set_xlim(mdates.date2num(lo - pad), mdates.date2num(hi + pad))
    span = hi - lo
    if span < dt.timedelta(days=1) and lo.date() == hi.date():
        fmt = "%H:%M"
        ax.set_xlabel(lo.strftime("%Y-%m-%d") + " (UTC)", fontsize=8)
    elif span < dt.timedelta(days=21):
        fmt = "%m-%d %H:%M"
    else:
        fmt = "%Y-%m-%d"
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=2, maxticks=maxticks))
    ax.xaxis.set_major_formatter(mdates.DateFormatter(fmt))


def phase_split_chart(iterations: list[tuple[int, dict[str, float]]], title: str) -> str:
    """Seconds of each phase per RL iteration, stacked bars (generation, reward, training,
    weight sync)."""
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_subplot()
    steps = [s for s, _ in iterations]
    phases = sorted({p for _, split in iterations for p in split})
    bottom = [0.0] * len(steps)
    for phase in phases:
        values = [split.get(phase, 0.0) for _, split in iterations]
        ax.bar(steps, values, bottom=bottom, label=phase.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xlabel("iteration")
    ax.set_ylabel("seconds")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7)
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


def storage_scaling(series: dict[str, list[tuple[int, float]]], title: str,
                    expected_mb_s: float | None = None) -> str:
    """Aggregate (stonewall) MB/s against node count, one line per phase; the config's
    expectation as a horizontal line where the record carries one."""
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    for phase, points in sorted(series.items()):
        points = sorted(points)
        ax.plot([n for n, _ in points], [v for _, v in points], marker="o", markersize=3,
                label=phase)
    if expected_mb_s:
        ax.axhline(expected_mb_s, color=EXPECTED_COLOR, linewidth=1.5,
                   label=f"expected {expected_mb_s:,.0f} MB/s")
    ax.set_xlabel("nodes")
    ax.set_ylabel("aggregate MB/s (stonewall)")
    counts = sorted({n for points in series.values() for n, _ in points})
    if counts:  # whole nodes only: the counts measured, half a node of room either side
        ax.set_xlim(counts[0] - 0.5, counts[-1] + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True) if len(counts) > 8
                                   else FixedLocator(counts))
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return png_data_uri(fig)


def storage_block_sizes(series: dict[str, list[tuple[float, float]]], title: str,
                        expected_mb_s: float | None = None) -> str:
    """Aggregate (stonewall) MB/s against block size (bytes, log scale) for one run, one
    line per phase."""
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    for phase, points in sorted(series.items()):
        ax.plot([b for b, _ in points], [v for _, v in points], marker="o", markersize=3,
                label=phase)
    if expected_mb_s:
        ax.axhline(expected_mb_s, color=EXPECTED_COLOR, linewidth=1.5,
                   label=f"expected {expected_mb_s:,.0f} MB/s")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: m.format_size(int(x))))
    ax.set_xlabel("block size")
    ax.set_ylabel("aggregate MB/s (stonewall)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return png_data_uri(fig)


BREAKDOWN_COLORS = {"compute": "#1f6feb", "exposed_comm": "#cf222e", "optimizer": "#8250df",
                    "sync": "#bf8700", "data": "#1a7f37", "checkpoint": "#57606a"}


def _scaling_sizes(scaling: dict) -> list[dict]:
    return sorted((scaling.get("metrics") or {}).get("sizes") or [], key=lambda s: s["nodes"])


def twin_label(fig: Figure, record: dict) -> None:
    """Under a figure drawn from a twin record, the twin's caveat (toolkit.twinnote), so the
    PNG says it wherever it is copied to; nothing for any other record."""
    caveat = twin_caveat(record)
    if caveat:
        fig.subplots_adjust(bottom=0.24)
        fig.text(0.5, 0.015, f"TWIN: {caveat}", ha="center", va="bottom", fontsize=7,
                 color="#0969da", wrap=True, gid="twin-caveat")


def scaling_efficiency(scaling: dict, title: str) -> Figure:
    """Measured efficiency against node count, beside the prediction with and without
    overlap of communication and compute; 1.0 is perfect scaling."""
    sizes = _scaling_sizes(scaling)
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    nodes = [s["nodes"] for s in sizes]

    def line(values: list, **kw: Any) -> None:
        pts = [(n, v) for n, v in zip(nodes, values, strict=False) if v is not None]
        if pts:
            ax.plot([n for n, _ in pts], [v for _, v in pts], marker="o", markersize=4, **kw)

    line([s.get("efficiency") for s in sizes], color=CURRENT_COLOR, label="measured")
    line([(s.get("predicted") or {}).get("efficiency_no_overlap") for s in sizes],
         color=FAIL_COLOR, linestyle="--", label="predicted, no overlap")
    line([(s.get("predicted") or {}).get("efficiency_overlap") for s in sizes],
         color=EXPECTED_COLOR, linestyle=":", label="predicted, full overlap")
    ax.axhline(1.0, color=BASELINE_COLOR, linewidth=1)
    ax.set_xlabel("nodes")
    ax.set_ylabel("scaling efficiency (per-GPU throughput)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    twin_label(fig, scaling)
    return fig


BAR_HEADROOM = 1.15  # the axes reach 15% above the tallest stack: room for its total


def scaling_breakdown(scaling: dict, title: str) -> Figure:
    """Stacked step-time parts (mean over ranks) per node count, each stack's total above
    it; the legend sits outside the axes so it covers no bar.

    The y-limit is set from the stacks: autoscaling stopped at the tallest stack's top
    (a zero-height part drawn there pins the limit with its sticky edge), cutting off the
    top of that bar and leaving no room for a label."""
    sizes = _scaling_sizes(scaling)
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    labels = [str(s["nodes"]) for s in sizes]
    bottom = [0.0] * len(sizes)
    for part, color in BREAKDOWN_COLORS.items():
        values = [((s.get("breakdown_s") or {}).get(part) or 0.0) * 1000 for s in sizes]
        ax.bar(labels, values, bottom=bottom, color=color, label=part)
        bottom = [b + v for b, v in zip(bottom, values, strict=False)]
    for x, total in enumerate(bottom):
        ax.annotate(f"{total:.1f} ms", (x, total), xytext=(0, 2), textcoords="offset points",
                    ha="center", va="bottom", fontsize=7, gid="bar-total")
    ax.set_ylim(0, max([*bottom, 0.0]) * BAR_HEADROOM or 1.0)
    ax.set_xlabel("nodes")
    ax.set_ylabel("ms per step (mean over ranks)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    twin_label(fig, scaling)
    return fig


def png_bytes(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


def write_scaling_pngs(scaling: dict, folder: Path) -> list[Path]:
    """``scaling-efficiency.png`` and ``scaling-breakdown.png`` in ``folder``."""
    title = f"{scaling['params'].get('model')} {scaling['params'].get('mode')} scaling"
    out = []
    for name, fig in (("scaling-efficiency.png", scaling_efficiency(scaling, title)),
                      ("scaling-breakdown.png", scaling_breakdown(scaling, title))):
        path = folder / name
        path.write_bytes(png_bytes(fig))
        out.append(path)
    return out


def inference_throughput(curves: dict[str, list[tuple[int, float, float | None]]]) -> str:
    """Aggregate decode tokens/s against batch size (log-log), one line per cluster / type,
    and the roofline bound of each as a dashed line where the record judged one."""
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    for group, points in sorted(curves.items()):
        batches = [b for b, _, _ in points]
        line = ax.plot(batches, [v for _, v, _ in points], marker="o", markersize=3,
                       label=f"{group} measured")[0]
        bound = [(b, r) for b, _, r in points if r is not None]
        if bound:
            ax.plot([b for b, _ in bound], [r for _, r in bound], linestyle="--",
                    color=line.get_color(), label=f"{group} roofline")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("decode batch size (sequences)")
    ax.set_ylabel("decode tokens/s (all sequences)")
    ax.set_title("decode throughput against batch size", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return png_data_uri(fig)


def serving_latency(levels: dict[str, list[dict[str, float]]]) -> str:
    """TTFT and TPOT p50/p90/p99 against concurrency (log-log), one colour per cluster /
    type, one line style per percentile; ``levels`` as :func:`metrics.serving_levels`."""
    fig = Figure(figsize=(9.6, 3.4))
    axes = fig.subplots(1, 2)
    styles = {"p50": "-", "p90": "--", "p99": ":"}
    for ax, (key, title) in zip(axes, (("ttft_s", "time to first token"),
                                       ("tpot_s", "time per output token")), strict=True):
        for n, (group, rows) in enumerate(sorted(levels.items())):
            colour = f"C{n % 10}"
            for q, style in styles.items():
                points = [(r["concurrency"], r[f"{key}_{q}"] * 1e3) for r in rows
                          if f"{key}_{q}" in r]
                if points:
                    ax.plot([c for c, _ in points], [v for _, v in points], marker="o",
                            markersize=3, linestyle=style, color=colour,
                            label=f"{group} {q}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        concurrencies = sorted({r["concurrency"] for rows in levels.values() for r in rows})
        ax.xaxis.set_major_locator(FixedLocator(concurrencies))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:.3g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _pos: f"{y:.3g}"))
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("ms")
        ax.set_title(f"{title}: p50, p90, p99", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    return png_data_uri(fig)
