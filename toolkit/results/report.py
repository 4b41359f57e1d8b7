"""``pctk report``: one self-contained HTML file from the results database.

Everything is inline (CSS, PNG plots as data URIs) and a Content-Security-Policy forbids
any fetch, so the file can be mailed, attached to a ticket or opened offline.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.record import check_created
from toolkit.fsutil import atomic_write_text
from toolkit.results import metrics as m
from toolkit.results import plots, verdicts
from toolkit.results.baseline import judge, latest_of_each_group
from toolkit.results.compare import DEFAULT_THRESHOLD, Comparison
from toolkit.results.reportparts import esc, expected_busbw, table, td
from toolkit.results.store import ResultStore, group_key
from toolkit.results.trend import build_series
from toolkit.results.trendreport import trends_section
from toolkit.twinnote import EMULATED, on_twin, twin_caveat

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem;
color:#1f2328;max-width:1200px}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{border-bottom:1px solid #d0d7de;padding-bottom:.3rem;
margin-top:2rem}h3{font-size:1.05rem;margin-bottom:.4rem}
.meta{color:#656d76;font-size:.9rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.85rem}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.OK,.PASS{background:#dafbe1}.WARN{background:#fff8c5}.FAIL{background:#ffebe9;font-weight:600}
.SKIP,.UNKNOWN{background:#eaeef2;color:#656d76}
.plots{display:flex;flex-wrap:wrap;gap:1rem}.plots img{max-width:100%;height:auto;
border:1px solid #d0d7de}
.empty{color:#656d76;font-style:italic}
.banner{padding:.6rem 1rem;border:1px solid #d0d7de;border-radius:6px;margin:1rem 0;
font-weight:400}
.banner strong{font-size:1.15rem;margin-right:.6rem}.banner ul{margin:.3rem 0 0;padding-left:1.2rem}
.twin{display:inline-block;background:#ddf4ff;color:#0969da;border:1px solid #54aeff;
border-radius:1rem;padding:0 .5rem;font-size:.75rem;font-weight:600;vertical-align:middle}
.scroll{overflow-x:auto;max-width:100%}
th.node{white-space:nowrap}table.health td{white-space:nowrap}
"""


def twin_badge(title: str) -> str:
    return f'<span class="twin" title="{esc(title)}">TWIN</span>'


TWIN_BADGE = twin_badge(f"measured on pctk's local twin: {EMULATED}")


def group_label(key: tuple[str, str]) -> str:
    return f"{key[0] or '?'} / {key[1] or '?'}"


def _natural_text(text: str) -> list[Any]:
    """gpu-st-p5-2 before gpu-st-p5-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _natural(item: tuple[str, Any]) -> list[Any]:
    return _natural_text(item[0])


def twin_mark(records: Iterable[dict[str, Any]]) -> str:
    """The TWIN badge, its tooltip the first twin record's caveat (a storage run's names the
    local disk that stood in for FSx); nothing when no record is from the twin."""
    caveat = next((c for r in records if (c := twin_caveat(r))), None)
    return f" {twin_badge(caveat)}" if caveat else ""


def _img(uri: str, alt: str, points: int) -> str:
    """``data-points``: how many values the plot draws, so a test can tell empty plots."""
    return f'<img src="{uri}" alt="{esc(alt)}" data-points="{points}">'


@dataclass
class GroupSummary:
    """What the cluster summary says of one (cluster, instance type), gathered record by
    record from newest to oldest, so the report never holds every record at once."""

    latest: dict[str, Any]
    first_created: str = ""
    runs: int = 0
    twin_runs: int = 0
    kinds: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    hosts: set[str] = field(default_factory=set)
    software: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, record: dict[str, Any]) -> None:
        self.runs += 1
        self.twin_runs += on_twin(record)
        self.first_created = record["created"]
        self.kinds[record["kind"]] += 1
        self.hosts.update(str(h) for h in (record.get("cluster") or {}).get("hosts") or [])
        for name, value in (record.get("software") or {}).items():
            # newest first, so each list starts with the current value
            if value is not None and str(value) not in self.software[name]:
                self.software[name].append(str(value))


def cluster_summary(groups: dict[tuple[str, str], GroupSummary]) -> str:
    parts = []
    for key, summary in sorted(groups.items()):
        latest = summary.latest
        cluster = latest.get("cluster") or {}
        kinds = summary.kinds
        hosts = sorted(summary.hosts)
        shown_hosts = ", ".join(hosts[:8]) + (f" … (+{len(hosts) - 8})" if len(hosts) > 8 else "")
        facts = [
            ("cluster", key[0] or "?"), ("instance type", key[1] or "?"),
            ("nodes (latest run)", cluster.get("nodes") if cluster.get("nodes") else "?"),
            ("partition", cluster.get("partition") or "?"),
            ("hosts seen", shown_hosts or "?"),
            ("results", ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items()))),
            ("first / latest", f"{summary.first_created} / {latest['created']}"),
        ]
        if summary.twin_runs:
            facts.append(("where", f"local twin for {summary.twin_runs} of {summary.runs} "
                          f"result(s): {EMULATED}"))
        software_rows = [
            [td(name), td(values[0]), td(", ".join(values[1:]) or "—")]
            for name, values in sorted(summary.software.items())
        ]
        parts.append(
            f"<h3>{esc(group_label(key))}{TWIN_BADGE if summary.twin_runs else ''}</h3>"
            + table(None, [[f"<th>{esc(k)}</th>", td(v)] for k, v in facts])
            + (table(["software", "latest", "also seen"], software_rows) if software_rows
               else '<p class="empty">no software versions recorded</p>')
        )
    return "".join(parts) or '<p class="empty">no results in the database</p>'


def regressions_section(comparisons: list[Comparison]) -> str:
    if not comparisons:
        return ('<p class="empty">no baselines set: mark a good run with '
                "<code>pctk results baseline ID</code></p>")
    rows = []
    for comp in comparisons:
        for point in comp.points or []:
            change = f"{point.change * 100:+.1f}%" if point.change is not None else "—"
            rows.append([
                td(group_label((comp.cluster, comp.instance_type))), td(comp.kind),
                td(point.metric), td(point.where), td(_fmt(point.baseline), "num"),
                td(_fmt(point.current), "num"),
                td(change, "FAIL" if point.regression else "OK"),
            ])
        for note in comp.notes:
            rows.append([td(group_label((comp.cluster, comp.instance_type))), td(comp.kind),
                         td("note"), td(note), td(""), td(""), td("")])
    found = sum(len(c.regressions) for c in comparisons)
    verdict = (f'<p class="FAIL">{found} regression(s) beyond '
               f"{comparisons[0].threshold * 100:.0f}%</p>" if found
               else '<p class="OK">no regressions against the baselines</p>')
    return verdict + table(
        ["cluster / type", "kind", "metric", "where", "baseline", "latest", "change"], rows)


def _fmt(value: float | str) -> str:
    return f"{value:,.4g}" if isinstance(value, float) else str(value)


def interconnect_section(store: ResultStore, groups: set[tuple[str, str]]) -> str:
    parts = []
    for kind in m.BUSBW_KINDS:
        for record in latest_of_each_group(store, kind):
            key = group_key(record)
            if key not in groups:
                continue
            baseline = store.baseline(*key, kind)
            base_curves = m.busbw_curves(baseline) if baseline else {}
            title = f"{group_label(key)} ({kind}, {record['created']})"
            emulated = m.emulated_collectives(record)
            images = [
                busbw_image(record, name + (" (EMULATED)" if name in emulated else ""),
                            name, points, base_curves.get(name), title)
                for name, points in sorted(m.busbw_curves(record).items())
            ]
            parts.append(f"<h3>{esc(title)}{twin_mark([record])}</h3>"
                         f"<p class=\"meta\">{esc(m.headline(record))}</p>"
                         + (f'<div class="plots">{"".join(images)}</div>' if images
                            else '<p class="empty">no busbw rows in this record</p>'))
    return "".join(parts) or '<p class="empty">no nccl-tests or collectives results</p>'


def busbw_image(record: dict[str, Any], label: str, collective: str,
                points: list[m.BusbwPoint], baseline: list[m.BusbwPoint] | None,
                title: str) -> str:
    expected = expected_busbw(record, collective, points)
    alt = f"{collective} busbw against message size, {title}" + (
        f"; judged against {expected.label}" if expected else "; no catalog expectation")
    chart = plots.busbw_chart(label, points, baseline, group_label(group_key(record)), expected)
    return _img(chart, alt, len(points))


@dataclass
class TrainingSeries:
    """Tokens/s per GPU and MFU of every fsdp run shown, per cluster / type."""

    tokens: plots.TimeSeries = field(default_factory=lambda: defaultdict(list))
    mfu: plots.TimeSeries = field(default_factory=lambda: defaultdict(list))

    def add(self, record: dict[str, Any]) -> None:
        label = group_label(group_key(record))
        if (workload := m.workload(record)) != "pretrain":  # other figures: own series
            label = f"{label} [{workload}]"
        when = check_created(record["created"])
        scalars = m.training_scalars(record)
        if "tokens_per_s_per_gpu" in scalars:
            self.tokens[label].append((when, scalars["tokens_per_s_per_gpu"]))
        if "mfu" in scalars:
            self.mfu[label].append((when, m.mfu_fraction(scalars["mfu"])))


def training_section(store: ResultStore, training: TrainingSeries,
                     groups: set[tuple[str, str]]) -> str:
    tokens, mfu = training.tokens, training.mfu
    if not tokens and not mfu:
        return '<p class="empty">no fsdp results</p>'
    baselines: dict[str, tuple[float | None, float | None]] = {}
    losses: dict[str, list[tuple[int, float]]] = {}
    rows = []
    for record in latest_of_each_group(store, "fsdp"):
        key = group_key(record)
        if key not in groups:
            continue
        base = store.baseline(*key, "fsdp")
        base_scalars = m.training_scalars(base) if base else {}
        base_mfu = base_scalars.get("mfu")
        baselines[group_label(key)] = (base_scalars.get("tokens_per_s_per_gpu"),
                                       m.mfu_fraction(base_mfu) if base_mfu is not None else None)
        if curve := m.loss_curve(record):
            losses[group_label(key)] = curve
        rows.append([f"<td>{esc(group_label(key))}{twin_mark([record])}</td>",
                     td(record["created"]), td(m.headline(record))])
    images = []
    if tokens or mfu:
        what = "tokens per second per GPU" + (" and MFU" if mfu else "")
        images.append(_img(plots.training_over_time(tokens, mfu, baselines), what + " over time",
                           sum(map(len, tokens.values())) + sum(map(len, mfu.values()))))
    no_mfu = sorted(set(tokens) - set(mfu))
    note = (f'<p class="empty">no MFU for {esc(", ".join(no_mfu))}: no peak for this device '
            "(MFU needs the GPU's published peak FLOP/s)</p>" if no_mfu else "")
    if losses:
        images.append(_img(plots.loss_chart(losses), "loss of the latest training run",
                           sum(map(len, losses.values()))))
    for key in sorted(groups):
        rl_run = latest_rl(store, key)
        if rl_run is not None and (split := m.rl_iterations(rl_run)):
            title = f"RL phase split per iteration, {group_label(key)} ({rl_run['created']})"
            images.append(_img(plots.phase_split_chart(split, title), title,
                               sum(len(p) for _, p in split)))
    return (f'<div class="plots">{"".join(images)}</div>' + note
            + table(["cluster / type", "latest run", "figures"], rows))


def inference_section(store: ResultStore, groups: set[tuple[str, str]]) -> str:
    """Decode throughput against batch of the latest inference run per cluster / type, with
    its roofline where one was judged (a GPU with a catalog bandwidth), and its figures."""
    curves: dict[str, list[tuple[int, float, float | None]]] = {}
    rows, unjudged = [], []
    for record in latest_of_each_group(store, "inference"):
        key = group_key(record)
        if key not in groups:
            continue
        label = group_label(key)
        if curve := m.inference_decode_curve(record):
            curves[label] = curve
            if all(bound is None for _, _, bound in curve):
                unjudged.append(label)
        rows.append([f"<td>{esc(label)}{twin_mark([record])}</td>", td(record["created"]),
                     td(m.headline(record))])
    if not rows:
        return '<p class="empty">no inference results</p>'
    image = _img(plots.inference_throughput(curves), "decode tokens per second against batch "
                 "size" + (", with the memory-bandwidth roofline" if len(unjudged) < len(curves)
                           else ""), sum(map(len, curves.values()))) if curves else ""
    note = (f'<p class="empty">no roofline for {esc(", ".join(unjudged))}: measured on a CPU '
            "or a GPU without a catalog memory bandwidth</p>" if unjudged else "")
    return (f'<div class="plots">{image}</div>' + note
            + table(["cluster / type", "latest run", "figures"], rows))


def serving_section(store: ResultStore, groups: set[tuple[str, str]]) -> str:
    """TTFT and TPOT percentiles against concurrency of the latest serving run per cluster /
    type (``bench inference --mode serve``), and its figures."""
    levels: dict[str, list[dict[str, Any]]] = {}
    rows = []
    for record in latest_of_each_group(store, "serving"):
        key = group_key(record)
        if key not in groups:
            continue
        label = group_label(key)
        if found := m.serving_levels(record):
            levels[label] = found
        rows.append([f"<td>{esc(label)}{twin_mark([record])}</td>", td(record["created"]),
                     td(m.headline(record))])
    if not rows:
        return '<p class="empty">no serving results</p>'
    image = _img(plots.serving_latency(levels), "time to first token and time per output "
                 "token, p50, p90 and p99, against concurrency",
                 sum(map(len, levels.values()))) if levels else ""
    return (f'<div class="plots">{image}</div>'
            + table(["cluster / type", "latest run", "figures"], rows))


def latest_rl(store: ResultStore, key: tuple[str, str], look: int = 50
              ) -> dict[str, Any] | None:
    """The newest rl-workload fsdp record of a group among its ``look`` newest fsdp runs."""
    for index, record in enumerate(store.newest_first("fsdp", *key)):
        if index >= look:
            break
        if m.workload(record) == "rl":
            return record
    return None


def health_section(store: ResultStore, groups: set[tuple[str, str]]) -> str:
    parts = []
    for record in latest_of_each_group(store, "health"):
        key = group_key(record)
        if key not in groups:
            continue
        matrix = m.health_matrix(record)
        checks = sorted({check for row in matrix.values() for check in row})
        rows = []
        for node in sorted(matrix, key=_natural_text):
            cells = [f'<th class="node">{esc(node)}</th>']
            for check in checks:
                cell = matrix[node].get(check)
                if cell is None:
                    cells.append(td("—", "UNKNOWN"))
                    continue
                tip = "; ".join(x for x in (
                    cell.message, f"value {cell.value}" if cell.value is not None else "",
                    f"expected {cell.expected}" if cell.expected is not None else "",
                    f"fix: {cell.remedy}" if cell.remedy else "") if x)
                cells.append(td(cell.status, cell.status, tip))
            rows.append(cells)
        title = f"{group_label(key)} ({record['created']}, verdict {record['verdict']['status']})"
        head = "<tr><th>node</th>" + "".join(
            f"<th>{esc(c).replace('_', '_<wbr>')}</th>" for c in checks) + "</tr>"
        parts.append(f"<h3>{esc(title)}{twin_mark([record])}</h3>" + (
            f'<div class="scroll"><table class="health"><thead>{head}</thead><tbody>'
            + "".join("<tr>" + "".join(r) + "</tr>" for r in rows)
            + "</tbody></table></div>" if matrix
            else '<p class="empty">no checks in this record</p>'))
    return "".join(parts) or '<p class="empty">no health results</p>'


def verdict_banner(latest: list[dict[str, Any]], comparisons: list[Comparison]) -> str:
    """The worst verdict over the latest run of each kind and cluster, with counts.

    A regression against a baseline lifts a PASS to WARN: the checks passed, but the
    numbers fell.
    """
    if not latest:
        return '<div class="banner UNKNOWN"><strong>Overall: no results</strong></div>'
    counts = {s: 0 for s in verdicts.ORDER}
    for record in latest:
        counts[_status(record)] += 1
    regressions = sum(len(c.regressions) for c in comparisons)
    worst = verdicts.overall(latest, regressions)
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    extra = f"; {regressions} regression(s) against baselines" if regressions else ""
    twin = sum(on_twin(r) for r in latest)
    where = f"; {twin} of them on the local twin" if twin else ""
    bad = [r for r in latest if _status(r) in ("WARN", "FAIL")]
    items = "".join(
        f"<li><b>{esc(_status(r))}</b>: {esc(r['kind'])} on {esc(group_label(group_key(r)))}"
        f"{twin_mark([r])} — {esc(_first_reason(r))}</li>" for r in
        sorted(bad, key=lambda r: -verdicts.ORDER.index(_status(r))))
    return (f'<div class="banner {worst}" id="verdict"><strong>Overall: {worst}</strong>'
            f"latest run of each kind and cluster: {esc(summary)}{esc(extra)}{esc(where)}"
            + (f"<ul>{items}</ul>" if items else "") + "</div>")


_status = verdicts.status_of


def _first_reason(record: dict[str, Any]) -> str:
    reasons = [r for r in (record.get("verdict") or {}).get("reasons") or []
               if isinstance(r, str)]
    reasons += [f"{node} {check}: {cell.status} {cell.message}".strip()
                for node, row in sorted(m.health_matrix(record).items(), key=_natural)
                for check, cell in sorted(row.items()) if cell.status in ("FAIL", "WARN")]
    worst = [r for r in reasons if re.search(r"\bFAIL\b", r)] or [
        r for r in reasons if re.search(r"\bWARN\b", r)]
    text = (worst or reasons or ["no reason given"])[0]
    return text if len(text) <= 160 else text[:157] + "..."


STORAGE_PLOTTED = ("seq_write", "seq_read", "seq_write_shared", "seq_read_shared",
                   "ckpt_write", "ckpt_read")


def storage_throughputs(record: dict[str, Any]) -> list[tuple[str, str | None, float]]:
    """(phase, block size, aggregate MB/s) of each throughput phase of a storage record,
    block-size sweeps included (``seq_read@4M``); the block size is None where unknown."""
    metrics = record.get("metrics") or {}
    default_block = (record.get("params") or {}).get("block_seq")
    out = []
    for name, section in metrics.items():
        phase, _, suffix = name.partition("@")
        if phase not in STORAGE_PLOTTED or not isinstance(section, dict):
            continue
        value = section.get("mb_per_s")
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            continue
        block = section.get("block") or suffix or default_block
        out.append((phase, block if isinstance(block, str) else None, float(value)))
    return out


def _block_bytes(block: str) -> float | None:
    match = re.match(r"^(\d+)([kKmMgG])$", block)
    if not match:
        return None
    return int(match[1]) * 1024 ** " kmg".index(match[2].lower())


def storage_section(records: list[dict[str, Any]], groups: set[tuple[str, str]]) -> str:
    """Per cluster and type: aggregate MB/s against node count, one line per phase and block
    size (every storage run shown, the newest figure per node count), and, where the latest
    run swept block sizes, MB/s against block size; the latest run's headline.
    ``records``: what the report shows, newest first."""
    scaling: dict[tuple[str, str], dict[str, dict[int, float]]] = defaultdict(dict)
    storage = [record for record in records if record["kind"] == "storage"]
    for record in reversed(storage):  # oldest first: newest wins
        key, nodes = group_key(record), record.get("params", {}).get("nodes")
        if key not in groups or not isinstance(nodes, int):
            continue
        for phase, block, value in storage_throughputs(record):
            label = f"{phase} {block}" if block else phase
            scaling[key].setdefault(label, {})[nodes] = value
    if not scaling:
        return '<p class="empty">no storage results</p>'
    images, rows = [], []
    for record in verdicts.latest_of_each(storage):
        key = group_key(record)
        if key not in scaling:
            continue
        series = {label: sorted(points.items()) for label, points in scaling[key].items()}
        expected = record.get("metrics", {}).get("expected_mb_per_s")
        expected = expected if isinstance(expected, int | float) else None
        title = f"{group_label(key)}: {record.get('params', {}).get('target', '?')}"
        images.append(_img(plots.storage_scaling(series, title, expected),
                           "storage throughput against node count, per phase and block size",
                           sum(map(len, series.values()))))
        by_block: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for phase, block, value in storage_throughputs(record):
            if block and (size := _block_bytes(block)):
                by_block[phase].append((size, value))
        if any(len(points) > 1 for points in by_block.values()):
            nodes = record.get("params", {}).get("nodes")
            images.append(_img(plots.storage_block_sizes(
                {phase: sorted(points) for phase, points in by_block.items()},
                f"{title}, {nodes} node(s), {record['created']}", expected),
                "storage throughput against block size, latest run",
                sum(map(len, by_block.values()))))
        rows.append([f"<td>{esc(group_label(key))}{twin_mark([record])}</td>",
                     td(record["created"]), td(m.headline(record)),
                     td(_status(record), _status(record))])
    return (f'<div class="plots">{"".join(images)}</div>'
            + table(["cluster / type", "latest run", "figures", "verdict"], rows))


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "-"


def scaling_section(records: list[dict[str, Any]]) -> str:
    """The newest scaling study of each cluster: efficiency measured and predicted against
    node count, the stacked step-time breakdown per size, and the diagnosis per size."""
    if not records:
        return ("<p>No scaling study yet: <code>pctk bench scaling --nodes 1,2,4</code>.</p>")
    parts = []
    for rec in records:
        title = (f"{group_label(group_key(rec))}: {rec['params'].get('model')} "
                 f"{rec['params'].get('mode')} scaling ({rec['created']})")
        verdict = rec["metrics"]
        rows = []
        for size in verdict.get("sizes") or []:
            pred, diag = size.get("predicted") or {}, size.get("diagnosis") or {}
            rows.append([td(size["nodes"]), td(size["world_size"]),
                         td(f"{size['step_s'] * 1000:.1f} ms"), td(_pct(size.get("efficiency"))),
                         td(f"{_pct(pred.get('efficiency_no_overlap'))} / "
                            f"{_pct(pred.get('efficiency_overlap'))}"),
                         td(diag.get("bottleneck", "-") + (f" ({diag['node']})"
                                                           if diag.get("node") else ""),
                            title="; ".join(diag.get("evidence") or []))])
        node = f" ({verdict['node']})" if verdict.get("node") else ""
        parts.append(
            f"<h3>{esc(title)}{twin_mark([rec])}</h3>"
            f"<p><b>bottleneck: {esc(verdict.get('bottleneck'))}{esc(node)}</b> — "
            f"{esc(verdict.get('summary'))}</p>"
            + "<ul>" + "".join(f"<li>{esc(x)}</li>" for x in verdict.get("evidence") or [])
            + "".join(f"<li>try: {esc(x)}</li>" for x in verdict.get("advice") or [])
            + "</ul>"
            + table(["nodes", "ranks", "step", "efficiency", "predicted (no / full overlap)",
                     "bottleneck"], rows)
            + _img(plots.png_data_uri(plots.scaling_efficiency(rec, title)),
                   "scaling efficiency, measured and predicted", len(rows))
            + _img(plots.png_data_uri(plots.scaling_breakdown(rec, title)),
                   "step-time breakdown per node count", len(rows)))
    return "".join(parts)


@dataclass(frozen=True)
class Report:
    html: str
    results: int  # records shown
    overall: str = "UNKNOWN"  # toolkit.results.verdicts.overall of the latest runs

    def write(self, out: Path) -> Path:
        return atomic_write_text(out, self.html, mode=0o644)


def build_report(store: ResultStore, cluster: str | None = None,
                 instance_type: str | None = None,
                 threshold: float = DEFAULT_THRESHOLD) -> str:
    return render_report(store, cluster, instance_type, threshold).html


def render_report(store: ResultStore, cluster: str | None = None,
                  instance_type: str | None = None,
                  threshold: float = DEFAULT_THRESHOLD) -> Report:
    """The report. The records shown are read once, one at a time, each feeding the
    summaries, the trend series and the latest-run lists (10,000 records held at once take
    about 550 MB); then the latest runs, their baselines and the few earlier runs each is
    judged against are read again."""

    groups: dict[tuple[str, str], GroupSummary] = {}
    newest: dict[tuple[str, str, str], dict[str, Any]] = {}
    training = TrainingSeries()
    storage: list[dict[str, Any]] = []  # few and small: the scaling plot wants them all
    scaling: list[dict[str, Any]] = []
    scaling_seen: set[tuple[str, str]] = set()

    def gather(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for record in records:  # newest first
            key = group_key(record)
            if key not in groups:
                groups[key] = GroupSummary(record)
            groups[key].add(record)
            newest.setdefault((record["kind"], *key), record)
            if record["kind"] == "fsdp":
                training.add(record)
            elif record["kind"] == "storage":
                storage.append(record)
            elif record["kind"] == "scaling" and key not in scaling_seen:
                scaling_seen.add(key)  # the newest study of each cluster
                scaling.append(record)
            yield record

    series = build_series(gather(store.each(cluster=cluster, instance_type=instance_type)))
    count = sum(group.runs for group in groups.values())
    keys = set(groups)
    latest = verdicts.latest_of_each(newest.values())
    judged = [judge(store, record, threshold) for record in latest]
    comparisons = [c for c in judged if c.basis == "manual baseline" or c.points]
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    sections = [
        ("Cluster summary", cluster_summary(groups)),
        ("Regressions against baselines", regressions_section(comparisons)),
        ("Trends over time", trends_section(series, store.get)),
        ("Interconnect: bus bandwidth by message size", interconnect_section(store, keys)),
        ("Training: throughput and MFU", training_section(store, training, keys)),
        ("Storage: shared file system throughput", storage_section(storage, keys)),
        ("Scaling: efficiency, step-time breakdown and bottleneck", scaling_section(scaling)),
        ("Inference: decode throughput and roofline", inference_section(store, keys)),
        ("Serving: latency percentiles against concurrency", serving_section(store, keys)),
        ("Node health", health_section(store, keys)),
    ]
    body = "".join(f"<section><h2>{esc(t)}</h2>{content}</section>" for t, content in sections)
    return Report(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>pctk report</title><style>{STYLE}</style></head><body>"
        f"<h1>pctk report</h1><p class=\"meta\">generated {esc(generated)} from "
        f"{esc(store.path)} — {count} result(s)</p>"
        f"{verdict_banner(latest, comparisons)}{body}</body></html>\n",
        count, verdicts.overall(latest, sum(len(c.regressions) for c in comparisons)))


def write_report(store: ResultStore, out: Path, cluster: str | None = None,
                 instance_type: str | None = None,
                 threshold: float = DEFAULT_THRESHOLD) -> Path:
    return render_report(store, cluster, instance_type, threshold).write(out)
