"""The Grafana dashboard for pctk's metrics, built with Grafana's foundation SDK.

``grafana-foundation-sdk`` (Grafana Labs, on PyPI) is a typed builder for Grafana's own
dashboard schema, generated from the same definitions Grafana uses, so the JSON matches what
Grafana 11.6 imports; we pin its Grafana-11.6 build exactly (the package numbers its builds
``<epoch>!<grafana version>``, and a plain ``pip install`` picks the newest epoch, which is not
always the newest Grafana version). The panels are data (``PANELS``: title, kind, unit,
queries) so a test can run every query against a live Prometheus.

The SDK is a development dependency: the built JSON ships beside this module
(``dashboard.json``, rewritten by ``tests/regen_golden.py``) and ``pctk observe dashboard``
prints that file; a test requires it to equal what the SDK builds from ``PANELS`` now.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATASOURCE_VAR = "datasource"
UID = "pctk-overview"
DASHBOARD_FILE = Path(__file__).with_name("dashboard.json")


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class PanelSpec:
    row: str
    title: str
    kind: str  # timeseries | stat | table
    unit: str
    queries: tuple[Query, ...]
    description: str = ""


def _q(expr: str, legend: str = "") -> Query:
    return Query(expr, legend)


PANELS: tuple[PanelSpec, ...] = (
    PanelSpec("Cluster", "Nodes by state", "timeseries", "short",
              (_q("sum by (partition, state) (pctk_slurm_nodes)", "{{partition}} {{state}}"),),
              "From sinfo: a drain or a fault wins over the base state."),
    PanelSpec("Cluster", "Nodes drained by pctk", "table", "short",
              (_q('pctk_slurm_node_drained{by="pctk"}', "{{node}} {{check}}"),),
              "The check that failed is the `check` label (Slurm reason `pctk: <check>: ...`)."),
    PanelSpec("Cluster", "Jobs by state", "timeseries", "short",
              (_q("sum by (partition, state) (pctk_slurm_jobs)", "{{partition}} {{state}}"),)),
    PanelSpec("Cluster", "Pending jobs: capacity vs priority", "timeseries", "short",
              (_q("sum by (partition, reason_class) (pctk_slurm_jobs_pending)",
                  "{{partition}} {{reason_class}}"),
               _q("max by (partition, reason_class) "
                  "(pctk_slurm_jobs_pending_oldest_seconds) / 60",
                  "oldest {{partition}} {{reason_class}} (min)"))),
    PanelSpec("Health", "Health matrix (0 OK, 1 WARN, 2 FAIL, 3 SKIP)", "table", "short",
              (_q("max by (node, check) (pctk_health_check_status)", "{{node}} {{check}}"),)),
    PanelSpec("Health", "Checks failing", "stat", "short",
              (_q("sum(pctk_health_check_status == bool 2)", "FAIL"),)),
    PanelSpec("Interconnect", "Bus bandwidth (mean over sizes) by instance type and nodes",
              "timeseries", "Bps",
              (_q("max by (instance_type, nodes, kind, collective) "
                  "(pctk_busbw_average_bytes_per_second)",
                  "{{instance_type}} x{{nodes}} {{kind}} {{collective}}"),)),
    PanelSpec("Training", "MFU", "timeseries", "percentunit",
              (_q("max by (cluster, instance_type) (pctk_fsdp_mfu_ratio)",
                  "{{cluster}} {{instance_type}}"),)),
    PanelSpec("Training", "Tokens per second per GPU", "timeseries", "short",
              (_q("max by (cluster, instance_type) (pctk_fsdp_gpu_tokens_per_second)",
                  "{{cluster}} {{instance_type}}"),)),
    PanelSpec("Storage", "Shared storage throughput vs expected", "timeseries", "Bps",
              (_q("max by (cluster, phase) (pctk_storage_throughput_bytes_per_second)",
                  "{{cluster}} {{phase}}"),
               _q("max by (cluster) (pctk_storage_expected_bytes_per_second)",
                  "{{cluster}} expected"))),
    PanelSpec("Cost", "Cost of jobs ended in the last 24 h (on-demand LIST price)",
              "timeseries", "currencyUSD",
              (_q('sum by (partition, instance_type) (pctk_slurm_cost_dollars{window="24h"})',
                  "{{partition}} {{instance_type}}"),),
              "Catalog on-demand list price x each job's GPU/CPU share of its nodes; bills "
              "differ (reservations, savings plans, idle nodes)."),
    PanelSpec("Cost", "GPU hours by user (jobs ended in the last 24 h)", "timeseries", "short",
              (_q('sum by (user, account) (pctk_slurm_gpu_hours{window="24h"})',
                  "{{user}} ({{account}})"),)),
    PanelSpec("Freshness", "Seconds since Slurm was last read", "stat", "s",
              (_q("time() - max(pctk_observe_last_success_timestamp_seconds)", "age"),)),
)


def dashboard_text() -> str:
    """The shipped dashboard, Grafana's JSON model as text (import it, or provision it)."""
    return DASHBOARD_FILE.read_text(encoding="utf-8")


def dashboard_json() -> dict[str, Any]:
    """The shipped dashboard as Grafana's JSON model."""
    board: dict[str, Any] = json.loads(dashboard_text())
    return board


def build_dashboard_text() -> str:
    """What ``dashboard.json`` must hold: ``PANELS`` built with the SDK (the dev extra)."""
    return json.dumps(build_dashboard_json(), indent=2) + "\n"


def build_dashboard_json() -> dict[str, Any]:
    """The dashboard built from ``PANELS`` with grafana-foundation-sdk."""
    from grafana_foundation_sdk.builders import stat, table, timeseries
    from grafana_foundation_sdk.builders.dashboard import Dashboard, DatasourceVariable, Row
    from grafana_foundation_sdk.builders.prometheus import Dataquery
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import DataSourceRef
    from grafana_foundation_sdk.models.prometheus import PromQueryFormat

    ds = DataSourceRef(type_val="prometheus", uid="${" + DATASOURCE_VAR + "}")

    def new_panel(kind: str) -> timeseries.Panel | stat.Panel | table.Panel:
        if kind == "stat":
            return stat.Panel()
        return table.Panel() if kind == "table" else timeseries.Panel()

    board = (Dashboard("pctk: cluster overview").uid(UID).tags(["pctk", "slurm"])
             .refresh("1m").time("now-24h", "now")
             .with_variable(DatasourceVariable(DATASOURCE_VAR).label("Prometheus")
                            .type("prometheus")))
    row = None
    for spec in PANELS:
        if spec.row != row:
            row = spec.row
            board = board.with_row(Row(row))
        panel = (new_panel(spec.kind).title(spec.title).unit(spec.unit).datasource(ds)
                 .description(spec.description))
        for i, query in enumerate(spec.queries):
            target = Dataquery().expr(query.expr).legend_format(query.legend).ref_id("ABCD"[i])
            if spec.kind == "table":
                target = target.instant().format(PromQueryFormat.TABLE)
            panel = panel.with_target(target)
        board = board.with_panel(panel)

    built: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    for number, panel in enumerate(built["panels"], start=1):
        panel["id"] = number
    return built


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query in a dashboard JSON."""
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]
