"""Tables (rich), CSV and a busbw-vs-size plot for collective runs."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from toolkit.bench.comm.model import CollectiveRun, Measurement
from toolkit.bench.comm.verdict import Verdict
from toolkit.cliout import console as cli_console
from toolkit.cliout import emit_json
from toolkit.fsutil import atomic_write_bytes, atomic_write_text

_STYLE = {"PASS": "green", "WARN": "yellow", "FAIL": "red", "UNKNOWN": "dim"}
# above this many runs, one line each instead of a per-size table each
MAX_RUN_TABLES = 12
CSV_FIELDS = ("source", "collective", "nranks", "dtype", "redop", "size_bytes", "count",
              "oop_time_us", "oop_algbw_gbps", "oop_busbw_gbps", "oop_wrong", "oop_error",
              "ip_time_us", "ip_algbw_gbps", "ip_busbw_gbps", "ip_wrong", "ip_error")


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:g} {unit}" if unit == "B" else f"{n:.4g} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _cells(m: Measurement | None) -> list[str]:
    if m is None:
        return ["-", "-", "-", "-"]
    wrong = (str(m.wrong) if m.wrong is not None else
             f"{m.error:.0e}" if m.error is not None else "N/A")
    t = m.time_us
    time_text = f"{t:.2f}" if t < 100 else f"{t:.1f}" if t < 10000 else f"{t:.0f}"
    return [time_text, f"{m.algbw_gbps:.2f}", f"{m.busbw_gbps:.2f}", wrong]


def run_title(run: CollectiveRun) -> str:
    parts = [run.collective or "unknown collective", f"{run.nranks or '?'} ranks",
             f"{len(run.hosts) or '?'} hosts", run.dtype or "?", f"net {run.network.transport}"]
    if run.source:
        parts.append(Path(run.source).name)
    return " | ".join(parts)


def print_run(console: Console, run: CollectiveRun, verdict: Verdict | None = None) -> None:
    t = Table(title=run_title(run), box=None, pad_edge=False, title_justify="left")
    for col in ("size", "count", "oop time us", "algbw", "busbw", "#wrong",
                "ip time us", "algbw", "busbw", "#wrong"):
        t.add_column(col, justify="right")
    bad = {(i.size_bytes, i.placement) for i in run.inconsistencies}
    for r in run.rows:
        mark = " *" if (r.size_bytes, "out_of_place") in bad or \
            (r.size_bytes, "in_place") in bad else ""
        t.add_row(human_bytes(r.size_bytes) + mark, str(r.count), *_cells(r.out_of_place),
                  *_cells(r.in_place))
    console.print(t)
    footer = []
    if run.out_of_bounds:
        footer.append(f"out of bounds {run.out_of_bounds['count']} "
                      f"{run.out_of_bounds['status']}")
    if run.avg_busbw_gbps is not None:
        footer.append(f"avg busbw {run.avg_busbw_gbps:g} GB/s")
    footer.append("complete" if run.complete else "[red]INCOMPLETE[/]")
    if bad:
        footer.append("* figures disagree beyond rounding")
    console.print("  " + ", ".join(footer))
    if verdict:
        console.print(f"  [bold {_STYLE[verdict.status]}]{verdict.status}[/]")
        for reason in verdict.reasons:
            console.print(f"    {reason}", markup=False, highlight=False)


def runs_summary(runs: list[CollectiveRun], verdicts: list[Verdict]) -> str:
    """One plain line per run (a log of thousands of runs prints in a blink, where a rich
    table per run takes seconds each)."""
    head = (f"{'#':>5} {'collective':<15} {'ranks':>5} {'hosts':>5} {'sizes':>5} "
            f"{'largest':>10} {'busbw':>8} {'avg busbw':>9}  status")
    lines = [head]
    for i, (run, v) in enumerate(zip(runs, verdicts, strict=True), start=1):
        top = run.largest()
        m = top.primary() if top else None
        first_issue = next((r for r in v.reasons if r.startswith(("FAIL", "WARN"))), "")
        avg = "" if run.avg_busbw_gbps is None else f"{run.avg_busbw_gbps:g}"
        lines.append(f"{i:>5} {run.collective or '?':<15} {run.nranks or '?':>5} "
                     f"{len(run.hosts) or '?':>5} {len(run.rows):>5} "
                     f"{human_bytes(top.size_bytes) if top else '-':>10} "
                     f"{f'{m.busbw_gbps:.2f}' if m else '-':>8} {avg:>9}  {v.status}"
                     + (f"  {first_issue}" if first_issue else ""))
    return "\n".join(lines)


def runs_to_csv(runs: list[CollectiveRun]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for run in runs:
        for r in run.rows:
            cells: list[object] = [run.source or "", run.collective or "", run.nranks or "",
                                   r.dtype, r.redop or "", r.size_bytes, r.count]
            for m in (r.out_of_place, r.in_place):
                cells += ([m.time_us, m.algbw_gbps, m.busbw_gbps,
                           "" if m.wrong is None else m.wrong,
                           "" if m.error is None else m.error] if m else [""] * 5)
            w.writerow(cells)
    return buf.getvalue()


def write_csv(path: str | Path, runs: list[CollectiveRun]) -> Path:
    return atomic_write_text(path, runs_to_csv(runs))


def plot_busbw(path: str | Path, runs: list[CollectiveRun], labels: list[str] | None = None,
               title: str = "Bus bandwidth by message size") -> Path:
    """PNG of busbw (primary placement) against size, log2 x axis, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    try:
        for i, run in enumerate(runs):
            pts = [(r.size_bytes, m.busbw_gbps) for r in run.rows if (m := r.primary())]
            if not pts:
                continue
            label = labels[i] if labels and i < len(labels) else run_title(run)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                    label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes, log2)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left")
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def wide_console() -> Console:
    """Tables need about 110 columns: the shared console prints them in full when piped."""
    return cli_console()


def show_runs(runs: list[CollectiveRun], verdicts: list[Verdict], rec: dict[str, Any],
              as_json: bool, csv_path: Path | None = None,
              plot_path: Path | None = None) -> None:
    """What ``pctk bench nccl`` and ``pctk bench collectives`` print: the record as JSON, or
    a table per run (one line per run past ``MAX_RUN_TABLES``) and the overall verdict;
    CSV and plot files on request."""
    if csv_path:
        write_csv(csv_path, runs)
    if plot_path:
        plot_busbw(plot_path, runs)
    if as_json:
        emit_json(rec)
        return
    console = wide_console()
    if len(runs) > MAX_RUN_TABLES:
        typer.echo(runs_summary(runs, verdicts))
        typer.echo(f"{len(runs)} runs: one line each (per-size tables above "
                   f"{MAX_RUN_TABLES} runs are left to --csv, --json or --out)")
    else:
        for run, v in zip(runs, verdicts, strict=True):
            print_run(console, run, v)
    console.print(f"[bold]overall {rec['verdict']['status']}[/]")
