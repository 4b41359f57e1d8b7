"""The generated Grafana dashboard: the shipped JSON is what the SDK builds from PANELS, one
panel per spec under its row, every query valid PromQL (promtool parses each one), the
Prometheus data source a variable. Each query returning series is checked against the twin's
live Prometheus in test_twin_prometheus.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from toolkit.cli import main
from toolkit.observe.dashboard import (
    DASHBOARD_FILE,
    PANELS,
    build_dashboard_text,
    dashboard_json,
    panel_queries,
)


def test_shipped_json_is_what_the_sdk_builds_from_the_panels() -> None:
    # the SDK is a dev dependency; a head node prints the shipped file
    assert DASHBOARD_FILE.read_text() == build_dashboard_text(), (
        "toolkit/observe/dashboard.json is stale: run python tests/regen_golden.py")


def test_dashboard_json_has_every_panel_and_query(tmp_path: Path) -> None:
    out = tmp_path / "pctk.json"
    assert main(["observe", "dashboard", "-o", str(out)]) == 0
    board = json.loads(out.read_text())
    assert board == dashboard_json()
    panels = [p for p in board["panels"] if p["type"] != "row"]
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert [p["title"] for p in panels] == [s.title for s in PANELS]
    assert rows == list(dict.fromkeys(s.row for s in PANELS))
    ids = [p["id"] for p in board["panels"]]
    assert len(set(ids)) == len(ids)
    assert board["templating"]["list"][0]["type"] == "datasource"
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert [t["refId"] for t in panel["targets"]] == list("ABCD"[:len(panel["targets"])])
    assert len(panel_queries(board)) == sum(len(s.queries) for s in PANELS)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_every_query_parses(tmp_path: Path) -> None:
    # promtool checks expressions inside a rules file; one recording rule per query
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"pctk:panel_{i}", "expr": expr}
        for i, (_title, expr) in enumerate(panel_queries(dashboard_json()))]}]}
    path = tmp_path / "queries.yml"
    path.write_text(json.dumps(rules))
    r = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
