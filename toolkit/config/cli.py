"""``pctk config``: new, check, upgrade, show, diff, regen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from toolkit.cliopts import pick_alias
from toolkit.cliout import JsonOption, emit_json, exit_with, fail_if
from toolkit.cliout import console as cli_console
from toolkit.config.check import check_file, check_text
from toolkit.config.diff import diff_configs
from toolkit.config.drift import apply_upgrade
from toolkit.config.findings import format_path
from toolkit.config.placeholders import parse_var_assignments
from toolkit.config.presets import regenerate
from toolkit.config.render import render_cluster_config
from toolkit.config.schema import parallelcluster_version
from toolkit.config.spec import load_spec
from toolkit.config.summary import summarize
from toolkit.config.yamlio import load_yaml, read_text
from toolkit.errors import PctkError, visible
from toolkit.fsutil import atomic_write_text
from toolkit.paths import config_or_preset, missing_config

app = typer.Typer(help="Generate, check, upgrade, show and compare ParallelCluster v3 configs.",
                  no_args_is_help=True)

OutputPath = Annotated[Path | None, typer.Option("-o", "--out", help="Write here (atomic).")]
OldOutputPath = Annotated[Path | None, typer.Option("--output", hidden=True,
                                                    help="Deprecated: -o/--out.")]
# every FILE argument below is a path or a preset name (`pctk config show p5-training`)
ConfigRef = Annotated[Path, typer.Argument(help="Config file or preset name.", readable=False,
                                           parser=config_or_preset)]
VarList = Annotated[
    list[str] | None, typer.Option("--var", help="Fill ${NAME} with VALUE: --var NAME=VALUE.")
]



def _load(path: Path) -> Any:
    if not path.exists():
        raise missing_config(path)  # neither a file nor a preset: name the presets
    return load_yaml(path)


@app.command("new")
def new(
    spec: Annotated[Path, typer.Option("--spec", help="Spec YAML (see cluster-configs/specs).",
                                       readable=False)],
    output: OutputPath = None,
    old_output: OldOutputPath = None,
    var: VarList = None,
    allow_unknown_types: Annotated[bool, typer.Option(
        "--allow-unknown-types",
        help="Render compute instance types the pctk catalog lacks (nothing is derived for them)."
    )] = False,
    keep_invalid: Annotated[bool, typer.Option(
        "--keep-invalid", help="Write the config even when `config check` rejects it (exit 1)."
    )] = False,
    as_json: bool = JsonOption,
) -> None:
    """Render a full ParallelCluster v3 YAML from a spec, then `config check` it.

    Exit 0 when the rendered config passes, 1 when it has ERROR findings (nothing is written
    unless --keep-invalid), 2 for an unusable spec.
    """
    output = pick_alias(output, old_output, "--out", "--output")
    text = render_cluster_config(load_spec(spec, allow_unknown_types), str(spec))
    target = str(output) if output is not None else "<rendered>"
    report = check_text(text, target, parse_var_assignments(var or []))
    write = report.exit_code == 0 or keep_invalid
    if output is not None and write:
        atomic_write_text(output, text)
    if as_json:
        emit_json({"spec": str(spec), "output": str(output) if output else None,
                    "written": output is not None and write,
                    "yaml": text if output is None and write else None,
                    "check": report.to_json()})
    else:
        if output is None and write:
            typer.echo(text, nl=False)
        _print_findings(report, err=True, infos=False)  # upstream's notes are for `check`
        _say_where(output, report, write)
    exit_with(report.exit_code)


def _say_where(output: Path | None, report: Any, written: bool) -> None:
    errors = len(report.errors)
    if not errors:
        warnings = sum(1 for f in report.findings if f.level.value == "WARNING")
        noted = f" with {warnings} warning{'s' if warnings > 1 else ''}" if warnings else ""
        if output is not None:
            typer.echo(f"wrote {output} (passes `pctk config check`{noted})", err=True)
        return
    what = str(output) if output is not None else "the config"
    verdict = f"the rendered config fails `pctk config check` ({errors} error" \
              f"{'s' if errors > 1 else ''})"
    if written:
        typer.echo(f"pctk: {what}: written anyway (--keep-invalid); {verdict}", err=True)
    else:
        typer.echo(f"pctk: {what}: not written: {verdict}; fix the spec, or pass "
                   "--keep-invalid to write it anyway", err=True)


def _print_unusable(report: Any) -> None:
    """Unusable input: one line on stderr, like every other pctk input error."""
    f = report.errors[0]
    hint = f"; fix: {f.hint}" if f.hint else ""
    typer.echo(f"pctk: error: {f.where(report.source)}: {f.message}{hint}", err=True)


def _print_findings(report: Any, err: bool = False, infos: bool = True) -> None:
    for f in report.findings:
        if f.level.value == "INFO" and not infos:
            continue
        where = f.where(report.source)
        hint = f" (fix: {f.hint})" if f.hint else ""
        typer.echo(f"{f.level.value:7} {where} {f.path_str}: {f.message}{hint}", err=err)


def _print_report(report: Any) -> None:
    if not report.usable:
        _print_unusable(report)
        return
    checks = f"aws-parallelcluster {report.schema_version} schema"
    if report.upstream is not None and report.upstream.ran:
        checks += f" and {len(report.upstream.ran)} of its validators"
    if not report.findings:
        typer.echo(f"{report.source}: valid ({checks}, pctk lints)")
    else:
        _print_findings(report)
        counts = {lvl: sum(1 for f in report.findings if f.level.value == lvl)
                  for lvl in ("ERROR", "WARNING", "INFO")}
        summary = ", ".join(f"{n} {lvl.lower()}{'s' if n > 1 else ''}"
                            for lvl, n in counts.items() if n)
        typer.echo(f"{report.source}: {summary} ({checks}, pctk lints)")
    _print_skipped(report)


def _print_skipped(report: Any) -> None:
    """Upstream validators that could not run offline, grouped by what they needed."""
    upstream = report.upstream
    if upstream is None:
        return
    if upstream.not_run:
        typer.echo(f"  upstream validators not run: {upstream.not_run}")
        return
    by_reason: dict[str, list[str]] = {}
    for s in upstream.skipped:
        by_reason.setdefault(s.reason, []).append(s.validator)
    if by_reason:
        typer.echo(f"  skipped {len(upstream.skipped)} upstream validators that need AWS "
                   "(pcluster create-cluster runs them):")
    for reason, names in sorted(by_reason.items()):
        typer.echo(f"    {reason}: {', '.join(sorted(set(names)))}")


@app.command("check")
def check(
    # readable=False here and below: an unreadable file is pctk's one-line error (exit 2) naming
    # the file, not typer's usage error
    files: Annotated[list[Path],
                     typer.Argument(help="ParallelCluster YAML files or preset names.",
                                    readable=False, parser=config_or_preset)],
    var: VarList = None,
    as_json: bool = JsonOption,
) -> None:
    """Check configs: YAML, ${VAR}s, official schema (offline), pctk lints, version drift.

    Exit 0 valid, 1 findings at ERROR level, 2 unusable input.
    """
    variables = parse_var_assignments(var or [])
    reports = [check_file(f, variables) for f in files]
    if as_json:
        emit_json({"files": [r.to_json() for r in reports]})
    else:
        for r in reports:
            _print_report(r)
    exit_with(max(r.exit_code for r in reports))


@app.command("upgrade")
def upgrade(
    file: Annotated[Path, typer.Argument(help="Config written for an older ParallelCluster.",
                                         readable=False)],
    output: OutputPath = None,
    old_output: OldOutputPath = None,
    in_place: Annotated[bool, typer.Option("--in-place", help="Rewrite FILE itself.")] = False,
    as_json: bool = JsonOption,
) -> None:
    """Rewrite known version-drift cases (comments kept); says what changed."""
    output = pick_alias(output, old_output, "--out", "--output")
    if (output is None) == (not in_place):
        raise PctkError("say where to write", "pass -o OUT or --in-place (not both)")
    text, changes = apply_upgrade(read_text(file), str(file))
    target = file if in_place else output
    assert target is not None
    if changes or not in_place:
        atomic_write_text(target, text)
    rows = [{"path": format_path(c.path), "change": c.fix, "why": c.message} for c in changes]
    if as_json:
        emit_json({"file": str(file), "output": str(target), "changes": rows,
                    "schema": f"aws-parallelcluster {parallelcluster_version()}"})
        return
    if not changes:
        typer.echo(f"{file}: nothing to upgrade for aws-parallelcluster "
                   f"{parallelcluster_version()}")
    for row in rows:
        typer.echo(f"{row['path']}: {row['change']} ({row['why']})")
    typer.echo(f"wrote {target}", err=True)


@app.command("show")
def show(file: ConfigRef, as_json: bool = JsonOption) -> None:
    """Queues, instance types, node and accelerator totals, EFA, storage, $/h."""
    summary = summarize(_load(file))
    if as_json:
        emit_json(summary.to_json())
        return
    table = Table(title=f"{visible(str(file))} ({summary.region or 'no region'})")
    for col in ("queue", "resource", "instance type", "capacity", "min", "max", "accel/node",
                "EFA", "$/h each"):
        table.add_column(col)
    for r in summary.resources:
        accel = f"{r.accelerators_per_node} x {r.accelerator}" if r.accelerator else "-"
        price = f"{r.price_usd_per_hour:,.2f}" if r.price_usd_per_hour is not None else "?"
        table.add_row(r.queue, r.compute_resource, r.instance_type, r.capacity_type,
                      str(r.min_count), str(r.max_count), accel, "yes" if r.efa else "no", price)
    console = cli_console()
    console.print(table)

    def money(v: float | None) -> str:
        return f"${v:,.2f}/h" if v is not None else "unknown (a type has no catalog price)"

    console.print(f"nodes {summary.nodes_min}-{summary.nodes_max}, accelerators "
                  f"{summary.accelerators_min}-{summary.accelerators_max}; storage: "
                  f"{', '.join(summary.storage) or 'none'}; accounting: "
                  f"{'yes' if summary.accounting else 'NO'}")
    console.print(f"on-demand compute price: {money(summary.price('min'))} at MinCount, "
                  f"{money(summary.price('max'))} at MaxCount (head node excluded)")


@app.command("diff")
def diff(a: ConfigRef, b: ConfigRef, as_json: bool = JsonOption) -> None:
    """Semantic differences by YAML path (queues, resources, storage matched by Name).

    Exit 0 when equal, 1 when they differ.
    """
    changes = diff_configs(_load(a), _load(b))
    if as_json:
        emit_json({"a": str(a), "b": str(b), "changes": [c.to_json() for c in changes]})
    else:
        for c in changes:
            if c.kind == "changed":
                typer.echo(f"~ {c.path}: {json.dumps(c.old)} -> {json.dumps(c.new)}")
            elif c.kind == "added":
                typer.echo(f"+ {c.path}: {json.dumps(c.new)}")
            else:
                typer.echo(f"- {c.path}: {json.dumps(c.old)}")
        if not changes:
            typer.echo("no semantic differences")
    fail_if(bool(changes))


@app.command("regen")
def regen(
    check_only: Annotated[bool, typer.Option("--check", help="Only report stale ones.")] = False,
    as_json: bool = JsonOption,
) -> None:
    """Regenerate cluster-configs/*.yaml from cluster-configs/specs/*.yaml."""
    changed = regenerate(check_only=check_only)
    if as_json:
        emit_json({"changed": [str(p) for p in changed], "check": check_only})
    else:
        verb = "stale" if check_only else "wrote"
        for p in changed:
            typer.echo(f"{verb} {p}")
        if not changed:
            typer.echo("presets are up to date")
    fail_if(check_only and bool(changed))
