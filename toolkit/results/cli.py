"""``pctk results`` (list, show, add, compare, baseline, prometheus) and ``pctk report``.

Exit codes: 0 ok, 1 a regression was found, 2 unusable input (bad file, unknown id, no
baseline). matplotlib is imported only by ``pctk report``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from toolkit.cliopts import DbOption
from toolkit.cliout import JsonOption, emit_json, fail_if
from toolkit.cliout import console as cli_console
from toolkit.errors import PctkError
from toolkit.fsutil import require_parent
from toolkit.results import metrics as m
from toolkit.results import verdicts
from toolkit.results.baseline import judge, latest_of_each_group
from toolkit.results.compare import DEFAULT_THRESHOLD, Comparison, compare_records
from toolkit.results.history import describe_change_point, load_series, trend_json
from toolkit.results.ingest import load_record_files, store_record_files
from toolkit.results.store import ResultStore, group_key, parse_since, printable
from toolkit.results.trend import TREND_KINDS

app = typer.Typer(help="Stored benchmark and health results: list, compare, export.",
                  no_args_is_help=True)

THRESHOLD_OPTION = typer.Option(
    f"{DEFAULT_THRESHOLD:g}", "--threshold",
    help="Relative drop that counts as a regression: 0.05 or 5%.")

FILES_ARGUMENT = typer.Argument(..., metavar="FILE...", help="Result record JSON files.")
LOGS_OPTION = typer.Option([], "--log", help="Extra raw log to keep (repeatable).")
PROM_OUT_OPTION = typer.Option(
    None, "--out", "-o", help="Textfile to write atomically, e.g. "
    "/var/lib/node_exporter/textfile_collector/pctk.prom; stdout when omitted.")
REPORT_OUT_OPTION = typer.Option(Path("report.html"), "--out", "-o", help="HTML file to write.")


@contextmanager
def open_store(db: Path | None, *, writer: bool = False) -> Iterator[ResultStore]:
    """The store, closed afterwards; each stored record a reader skipped is named once. A
    reader (``writer`` False) reads a database it cannot write (a read-only mount) too."""
    store = ResultStore(db, writer=writer)
    try:
        yield store
    finally:
        store.close()
        for rid, reason in store.unusable.items():
            typer.echo(f"warning: skipped stored result {printable(rid)}: {reason}", err=True)


def parse_threshold(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise PctkError(f"--threshold {text!r} is not a fraction between 0 and 1",
                        "use e.g. 0.05 or 5%")
    return value


def _short(rid: str) -> str:
    return rid[:12]


def summary(record: dict[str, Any], baseline_ids: set[str]) -> dict[str, Any]:
    cluster, instance_type = group_key(record)
    return {
        "id": record["id"], "created": record["created"], "kind": record["kind"],
        "cluster": cluster or None, "instance_type": instance_type or None,
        "nodes": (record.get("cluster") or {}).get("nodes"),
        "status": record["verdict"]["status"], "headline": m.headline(record),
        "baseline": record["id"] in baseline_ids,
    }


@app.command("list")
def list_results(
    kind: str | None = typer.Option(None, "--kind",
                                    help="nccl-tests, collectives, fsdp, storage, health, "
                                    "inference, serving."),
    cluster: str | None = typer.Option(None, "--cluster"),
    instance_type: str | None = typer.Option(None, "--instance-type"),
    since: str | None = typer.Option(None, "--since", help="7d, 12h or an ISO date/time."),
    limit: int = typer.Option(20, "--limit", min=1),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Stored results, newest first."""
    since_iso = parse_since(since) if since else None  # bad input creates no database
    with open_store(db) as store:
        records = store.list(kind=kind, cluster=cluster, instance_type=instance_type,
                             since=since_iso, limit=limit)
        baseline_ids = {b["result_id"] for b in store.baselines()}
    rows = [summary(r, baseline_ids) for r in records]
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"{len(rows)} result(s)")
    for column in ("id", "created", "kind", "cluster", "instance type", "nodes", "verdict"):
        table.add_column(column, no_wrap=column in ("id", "created", "kind"))
    table.add_column("figures")
    for row in rows:
        table.add_row(_short(row["id"]) + (" *" if row["baseline"] else ""), row["created"],
                      row["kind"], row["cluster"] or "?", row["instance_type"] or "?",
                      str(row["nodes"] or "?"), row["status"], row["headline"])
    console = cli_console()
    console.print(table)
    if any(r["baseline"] for r in rows):
        console.print("* baseline of its cluster / instance type / kind")
    if rows:
        latest = verdicts.latest_of_each(records)
        worst = verdicts.overall(latest)
        failed = [f"{r['kind']} {_short(r['id'])}" for r in latest
                  if verdicts.status_of(r) == worst and worst in ("WARN", "FAIL")]
        console.print(f"overall (newest listed run of each kind and cluster): {worst}"
                      + (f" — {', '.join(failed)}" if failed else ""), highlight=False)


@app.command("show")
def show(
    result_id: str = typer.Argument(..., metavar="ID", help="Result id or a unique prefix."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """One result: where it ran, the software, its figures and its stored raw logs."""
    with open_store(db) as store:
        record = store.get(result_id)
        logs = store.logs(record["id"])
    if as_json:
        emit_json({"record": record, "stored_logs": [
            {"name": log.name, "sha256": log.sha256, "size": log.size, "path": str(log.path)}
            for log in logs]})
        return
    console = cli_console()
    envelope = Table(show_header=False, title=f"{record['kind']} result {record['id']}")
    cluster = record.get("cluster") or {}
    for key, value in (("created", record["created"]), ("cluster", cluster.get("name")),
                       ("instance type", cluster.get("instance_type")),
                       ("nodes", cluster.get("nodes")), ("job", cluster.get("job_id")),
                       ("verdict", record["verdict"]["status"]),
                       ("reasons", "; ".join(record["verdict"].get("reasons") or [])),
                       ("figures", m.headline(record))):
        envelope.add_row(key, "" if value is None else str(value))
    for key, value in sorted((record.get("software") or {}).items()):
        if value is not None:
            envelope.add_row(f"software.{key}", str(value))
    console.print(envelope)
    _print_details(console, record)
    for log in logs:
        console.print(f"raw log {log.name} ({log.size} bytes): {log.path}")


def _print_details(console: Console, record: dict[str, Any]) -> None:
    for name, points in m.busbw_curves(record).items():
        table = Table(title=f"{name} busbw")
        table.add_column("size", justify="right")
        table.add_column("busbw GB/s", justify="right")
        for point in points:
            table.add_row(m.format_size(point.size), f"{point.busbw:.2f}")
        console.print(table)
    scalars = m.training_scalars(record)
    if scalars:
        table = Table(title="training")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for key, value in sorted(scalars.items()):
            table.add_row(key, f"{value:,.4g}")
        console.print(table)
    matrix = m.health_matrix(record)
    if matrix:
        checks = sorted({c for row in matrix.values() for c in row})
        table = Table(title="health")
        table.add_column("node")
        for check in checks:
            table.add_column(check)
        colours = {"OK": "green", "WARN": "yellow", "FAIL": "bold red"}
        for node, row in sorted(matrix.items()):
            cells = []
            for check in checks:
                status = row[check].status if check in row else "-"
                cells.append(f"[{colours.get(status, 'dim')}]{status}[/]")
            table.add_row(node, *cells)
        console.print(table)
        for node, row in sorted(matrix.items()):
            for check, cell in sorted(row.items()):
                if cell.status in ("WARN", "FAIL"):
                    fix = f" (fix: {cell.remedy})" if cell.remedy else ""
                    console.print(f"{cell.status} {node} {check}: {cell.message}{fix}",
                                  markup=False)


@app.command("add")
def add(
    files: list[Path] = FILES_ARGUMENT,
    logs: list[Path] = LOGS_OPTION,
    make_baseline: bool = typer.Option(False, "--baseline",
                                       help="Also make each added result the baseline."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Ingest record files written by node-side jobs, with their raw logs."""
    loaded = load_record_files(files, logs)  # before opening: bad input creates no database
    with open_store(db, writer=True) as store:
        done = store_record_files(store, loaded)
        if make_baseline:
            for item in done:
                store.set_baseline(item.id)
        db_path = store.path
    for d in done:  # on stderr, so with --json too
        for missing in d.missing_logs:
            typer.echo(f"warning: {d.path} names raw log {missing}, which does not exist",
                       err=True)
        for refused in d.refused_logs:
            typer.echo(f"warning: {d.path}: raw log not kept, {refused}", err=True)
    if as_json:
        emit_json({"db": str(db_path), "added": [
            {"file": str(d.path), "id": d.id, "kind": d.kind, "new": d.new, "logs": d.logs,
             "missing_logs": d.missing_logs, "refused_logs": d.refused_logs} for d in done]})
        return
    for d in done:
        if d.new:
            typer.echo(f"added {d.kind} {d.id} from {d.path} ({d.logs} raw log(s))")
        else:
            typer.echo(f"{d.kind} from {d.path}: already stored as {d.id}")
    typer.echo(f"database: {db_path}")


@app.command("baseline")
def baseline(
    result_id: str | None = typer.Argument(None, metavar="[ID]",
                                           help="Make this result the baseline; omit to list."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Set the baseline of a result's cluster / instance type / kind, or list baselines."""
    with open_store(db, writer=result_id is not None) as store:
        if result_id is not None:
            cluster, instance_type, kind = store.set_baseline(result_id)
            rid = store.resolve_id(result_id)
            if as_json:
                emit_json({"id": rid, "cluster": cluster, "instance_type": instance_type,
                           "kind": kind})
            else:
                typer.echo(f"baseline for {cluster or '?'} / {instance_type or '?'} / {kind}: "
                           f"{rid}")
            return
        rows = store.baselines()
        for row in rows:
            store.usable(row["result_id"])  # names an unusable baseline on stderr
    if as_json:
        emit_json(rows)
        return
    table = Table(title="baselines")
    for column in ("cluster", "instance type", "kind", "result", "set at"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["cluster"] or "?", row["instance_type"] or "?", row["kind"],
                      _short(row["result_id"]), row["set_at"])
    cli_console().print(table)


@app.command("compare")
def compare(
    result_id: str | None = typer.Argument(
        None, metavar="[ID]", help="Result to judge; omit for the latest of each kind."),
    against: str | None = typer.Option(None, "--against", metavar="ID",
                                       help="Compare with this result, not the baseline."),
    kind: str | None = typer.Option(None, "--kind"),
    cluster: str | None = typer.Option(None, "--cluster"),
    instance_type: str | None = typer.Option(None, "--instance-type"),
    threshold: str = THRESHOLD_OPTION,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Flag busbw, tokens/s, MFU, storage drops and new health FAILs against the baseline
    (exit 1)."""
    limit = parse_threshold(threshold)
    with open_store(db) as store:
        comparisons = _comparisons(store, result_id, against, kind, cluster, instance_type,
                                   limit)
    regressed = any(c.regressions for c in comparisons)
    if as_json:
        emit_json({"regressed": regressed, "comparisons": [c.to_json() for c in comparisons]})
    else:
        _print_comparisons(comparisons)
    fail_if(regressed)


def _comparisons(store: ResultStore, result_id: str | None, against: str | None,
                 kind: str | None, cluster: str | None, instance_type: str | None,
                 threshold: float) -> list[Comparison]:
    """Against --against, else the manual baseline, else the run's own recent history."""
    if result_id is not None:
        current = store.get(result_id)
        if against:
            base = store.get(against)
            if base["kind"] != current["kind"]:
                raise PctkError(f"cannot compare a {current['kind']} result with a "
                                f"{base['kind']} result", "pick two results of the same kind")
            return [compare_records(current, base, threshold)]
        comparison = judge(store, current, threshold)
        if not comparison.points and comparison.basis != "manual baseline":
            key = group_key(current)
            raise PctkError(
                f"no {current['kind']} baseline for {key[0] or '?'} / {key[1] or '?'} and too "
                f"little history for an automatic one ({'; '.join(comparison.notes)})",
                "set one with `pctk results baseline ID`, or pass --against ID")
        return [comparison]
    if against:
        raise PctkError("--against needs a result ID to compare", "pass ID before --against")
    comparisons = []
    for k in [kind] if kind else ["nccl-tests", "collectives", "fsdp", "health", "storage",
                                  "inference", "serving"]:
        for current in latest_of_each_group(store, k):
            key = group_key(current)
            if (cluster is not None and key[0] != cluster) or (
                    instance_type is not None and key[1] != instance_type):
                continue
            comparisons.append(judge(store, current, threshold))
    if not any(c.points for c in comparisons):
        raise PctkError("no result has a baseline or enough history to compare against",
                        "mark a good run with `pctk results baseline ID`")
    return comparisons


def _print_comparisons(comparisons: list[Comparison]) -> None:
    console = cli_console()
    for comp in comparisons:
        against = (f"baseline {_short(comp.baseline_id)}" if comp.basis == "manual baseline"
                   else f"automatic baseline: {comp.basis}")
        if not comp.points:  # no baseline yet, or no figure in common: no empty table
            why = "; ".join(comp.notes) or f"no figure in common with {against}"
            console.print(f"{comp.kind} {comp.cluster or '?'} / {comp.instance_type or '?'} "
                          f"{_short(comp.current_id)}: nothing to compare ({why})",
                          markup=False)
            continue
        table = Table(title=f"{comp.kind} {comp.cluster or '?'} / {comp.instance_type or '?'}: "
                            f"{_short(comp.current_id)} vs {against}")
        for column in ("metric", "where", "baseline", "latest", "change", ""):
            table.add_column(column)
        for p in comp.points:
            change = f"{p.change * 100:+.1f}%" if p.change is not None else ""
            flag = "[bold red]REGRESSION[/]" if p.regression else "[green]ok[/]"
            table.add_row(p.metric, p.where, _value(p.baseline), _value(p.current), change, flag)
        console.print(table)
        for note in comp.notes:
            console.print(f"note: {note}", markup=False)
    found = sum(len(c.regressions) for c in comparisons)
    threshold = comparisons[0].threshold if comparisons else DEFAULT_THRESHOLD
    console.print(f"[bold red]{found} regression(s) beyond {threshold:.0%}[/]" if found
                  else f"[green]no regressions beyond {threshold:.0%}[/]")


def _value(value: float | str) -> str:
    return f"{value:,.4g}" if isinstance(value, float) else str(value)


@app.command("trend")
def trend(
    kind: str | None = typer.Option(None, "--kind",
                                    help="nccl-tests, collectives, fsdp, storage, health, "
                                    "inference, serving."),
    metric: str | None = typer.Option(
        None, "--metric", help="busbw_GBps, tokens_per_s_per_gpu, mfu, health_fail_count, "
        "decode_tokens_per_s, output_tokens_per_s, goodput_requests_per_s."),
    cluster: str | None = typer.Option(None, "--cluster"),
    instance_type: str | None = typer.Option(None, "--instance-type"),
    since: str | None = typer.Option(None, "--since", help="7d, 12h or an ISO date/time."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Each figure over time per cluster / instance type / node count, with change points."""
    if kind is not None and kind not in TREND_KINDS:
        raise PctkError(f"unknown --kind {kind!r}", f"use one of: {', '.join(TREND_KINDS)}")
    since_iso = parse_since(since) if since else None
    with open_store(db) as store:
        data = trend_json(load_series(store, kind, cluster, instance_type, since_iso, metric))
    if as_json:
        emit_json(data)
        return
    console = cli_console()
    table = Table(title=f"{len(data['series'])} series")
    for column in ("series", "runs", "from", "to", "latest", "median (last 10)",
                   "change points"):
        table.add_column(column)
    for item in data["series"]:
        table.add_row(item["label"], str(item["runs"]), item["first"][:10], item["last"][:10],
                      f"{item['latest']:,.4g}", f"{item['recent_median']:,.4g}",
                      str(len(item["change_points"])))
    console.print(table)
    for item in data["series"]:
        for cp in item["change_points"]:
            console.print(f"{item['label']}: change at {describe_change_point(cp)}",
                          markup=False)
    console.print(f"method: {data['method']}", markup=False)


@app.command("prometheus")
def prometheus(
    out: Path | None = PROM_OUT_OPTION,
    threshold: str = THRESHOLD_OPTION,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Latest results as gauges for node_exporter's textfile collector."""
    # prometheus_client costs about 45 ms of start-up: only this command pays it
    from toolkit.results.prometheus import collect, render, write_textfile

    limit = parse_threshold(threshold)
    with open_store(db) as store:
        if out is None:
            typer.echo(render(collect(store, limit)), nl=False)
            return
        path, samples = write_textfile(store, out, limit)
    if as_json:
        emit_json({"path": str(path), "samples": samples})
    else:
        typer.echo(f"wrote {samples} samples to {path}")


def report_command(
    out: Path = REPORT_OUT_OPTION,
    cluster: str | None = typer.Option(None, "--cluster"),
    instance_type: str | None = typer.Option(None, "--instance-type"),
    threshold: str = THRESHOLD_OPTION,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Write one self-contained HTML report: busbw, training, health, cluster summary."""
    from toolkit.results.report import render_report  # matplotlib

    limit = parse_threshold(threshold)
    require_parent(out)
    with open_store(db) as store:
        report = render_report(store, cluster, instance_type, limit)
    path = report.write(out)
    if as_json:
        emit_json({"path": str(path), "results": report.results, "overall": report.overall})
    else:
        typer.echo(f"wrote {path} ({report.results} results); overall: {report.overall}")
    fail_if(report.overall == "FAIL")


def _scaling_diagnosis(rec: dict[str, Any], store: ResultStore) -> dict[str, Any]:
    """A scaling study's diagnosis: its largest size's, judged again from the stored FSDP
    records where they all are (today's rules), else as the study recorded it."""
    from toolkit.results.diagnose import NotDiagnosable
    from toolkit.results.scaling import study

    ids = [i for i in (rec.get("params") or {}).get("records") or [] if isinstance(i, str)]
    result = rec.get("metrics") or {}
    if ids and all(store.has(i) for i in ids):
        strong = (rec.get("params") or {}).get("mode", result.get("mode")) == "strong"
        result = study([store.get(i) for i in ids], strong=strong, store=store)
    sizes = result.get("sizes") or []
    if not sizes or not isinstance(sizes[-1], dict) or "diagnosis" not in sizes[-1]:
        raise NotDiagnosable("this scaling record holds no per-size diagnosis")
    return {**sizes[-1]["diagnosis"], "evidence": result.get("evidence")
            or sizes[-1]["diagnosis"]["evidence"], "study": rec.get("id")}


def diagnose_command(
    record: str = typer.Argument(..., help="An FSDP or scaling record file, or a stored "
                                 "result id (or a unique prefix)."),
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Which layer bounds an FSDP run or a scaling study's largest size (compute,
    interconnect, straggler, storage, overhead)."""
    from toolkit.results.diagnose import NotDiagnosable, breakdown_of, diagnose
    from toolkit.results.ingest import record_from
    from toolkit.results.scaling import busbw_for

    with open_store(db) as store:
        rec = record_from(record, store)
        try:
            if rec.get("kind") == "scaling":
                verdict = _scaling_diagnosis(rec, store)
            else:
                breakdown_of(rec)  # another kind's params.nodes is no FSDP node count
                verdict = diagnose(rec, busbw_for(rec, store))
        except NotDiagnosable as exc:
            raise PctkError(f"{record}: {exc}", "give an FSDP record from `pctk bench fsdp` "
                            "or a study from `pctk bench scaling`") from None
    if as_json:
        emit_json(verdict)
        return
    from toolkit.results.diagnose import verdict_lines

    for line in verdict_lines(verdict):
        typer.echo(line)
