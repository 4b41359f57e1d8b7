"""A sweep as a ``pctk.result/v1`` record (kind ``health``) and as a node x check table."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from benchmarks.record import new_record, write_record
from toolkit.cliout import console as cli_console
from toolkit.health.sweep import SweepResult

STYLE = {"OK": "green", "WARN": "yellow", "FAIL": "bold red", "SKIP": "dim",
         "UNKNOWN": "magenta"}
SHOWN = ("FAIL", "WARN", "UNKNOWN")  # statuses whose messages are listed below the table
# record "software" keys <- node-side "software" check keys
SOFTWARE_KEYS = {"libfabric": "libfabric", "efa": "efa_installer", "nccl": "nccl",
                 "aws_ofi_nccl": "aws_ofi_nccl", "driver": "driver", "cuda": "cuda"}


def _software(result: SweepResult) -> dict[str, Any]:
    sw: dict[str, Any] = {"python": platform.python_version(), "torch": None, "host": None}
    found: dict[str, Any] = next((c["software"]["value"] for c in result.nodes.values()
                  if isinstance(c.get("software", {}).get("value"), dict)), {})
    for key, node_key in SOFTWARE_KEYS.items():
        sw[key] = found.get(node_key)
    return sw


def reasons(result: SweepResult) -> list[str]:
    out = []
    for node, checks in result.nodes.items():
        for name, c in checks.items():
            if c["status"] in SHOWN:
                out.append(f"{node}: {name} {c['status']}: {c['message']}")
    out += result.notes
    out += [f"{n}: drained: {r}" for n, r in result.drained.items()]
    out += [f"{n}: resumed" for n in result.resumed]
    return out


def to_record(result: SweepResult) -> dict[str, Any]:
    types = {t for t in result.instance_types.values() if t}
    return new_record(
        "health",
        params={"level": result.level, "nodes": sorted(result.nodes),
                "partition": result.partition, "run_id": result.run_id,
                "drained": result.drained, "resumed": result.resumed,
                "unchecked": result.unchecked, "notes": result.notes,
                "max_drain": result.max_drain, "elapsed_s": result.elapsed_s},
        metrics={"nodes": result.nodes},
        status=result.verdict,
        reasons=reasons(result),
        cluster={"hosts": sorted(result.nodes), "nodes": len(result.nodes),
                 "partition": result.partition, "job_id": ",".join(result.job_ids) or None,
                 "instance_type": types.pop() if len(types) == 1 else None},
        software=_software(result),
        raw_logs=[str(p.relative_to(result.run_dir)) for p in sorted(result.run_dir.glob("*.out"))],
    )


def write(result: SweepResult, path: str | Path, record: dict[str, Any] | None = None) -> Path:
    """Write the record (``record``, so that several copies share one id) at ``path``."""
    rec = dict(record) if record is not None else to_record(result)
    target = Path(path)
    rec["raw_logs"] = [os.path.relpath(result.run_dir / p, target.resolve().parent)
                       for p in rec["raw_logs"]]
    return write_record(target, rec)


HEADER = {"gpu_devices": "gpudev", "gpu_count": "gpus", "gpu_ecc": "ecc", "gpu_remap": "remap",
          "gpu_xid": "xid", "gpu_throttle": "thrott", "gpu_pcie": "pcie", "gpu_memory": "gpumem",
          "software": "sw", "storage": "mounts"}


def table(result: SweepResult) -> tuple[Table, list[str]]:
    """The node x check table, and the checks left out because every node skipped them."""
    checks = list(dict.fromkeys(c for row in result.nodes.values() for c in row))
    rows = list(result.nodes.values())
    all_skip = [c for c in checks
                if all(r.get(c, {}).get("status", "SKIP") == "SKIP" for r in rows)]
    shown = [c for c in checks if c not in all_skip]
    t = Table(title=f"pctk health ({result.level}): {result.verdict}", box=box.SIMPLE_HEAD,
              padding=(0, 1), title_justify="left")
    t.add_column("node", no_wrap=True)
    for c in shown:
        t.add_column(HEADER.get(c, c), justify="center", no_wrap=True)
    for node, row in result.nodes.items():
        cells = [Text(row[c]["status"], style=STYLE.get(row[c]["status"], ""))
                 if c in row else Text("-", style="dim") for c in shown]
        t.add_row(node, *cells)
    return t, all_skip


def print_report(result: SweepResult, console: Console | None = None) -> None:
    con = console or cli_console()
    tab, all_skip = table(result)
    con.print(tab)
    if all_skip:
        con.print(f"[dim]skipped on every node: {', '.join(all_skip)}[/]", highlight=False)
    for node, row in result.nodes.items():
        for name, c in row.items():
            if c["status"] in SHOWN:
                style = STYLE[c["status"]]
                con.print(f"[{style}]{c['status']}[/] {node} {name}: {c['message']}"
                          + (f"  [dim]fix: {c['remedy']}[/]" if c.get("remedy") else ""),
                          highlight=False)
    for note in result.notes:
        con.print(f"[bold]note:[/] {note}", highlight=False)
    for node, reason in result.drained.items():
        con.print(f"drained {node}: {reason}", highlight=False)
    for node in result.resumed:
        con.print(f"resumed {node}", highlight=False)
