"""The shipped alert rules, the twin's and the head node's Prometheus configs, checked by
Debian's promtool: `check rules`, `check config`, and `test rules` (alerts_test.yml: each
alert fires on the series it is meant for, after its `for:`, and not on its neighbours)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from toolkit.cli import main
from toolkit.local.stack import render_prometheus_config
from toolkit.observe.rules import RULES_FILE, alert_names, render_rules

HERE = Path(__file__).parent
pytestmark = pytest.mark.skipif(shutil.which("promtool") is None,
                                reason="promtool not installed (apt-get install prometheus)")


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def test_rules_file_is_valid_and_every_alert_is_unit_tested() -> None:
    r = promtool("check", "rules", RULES_FILE)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in r.stdout
    r = promtool("test", "rules", HERE / "alerts_test.yml")
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    tested = {t["alertname"] for case in yaml.safe_load((HERE / "alerts_test.yml").read_text())
              ["tests"] for t in case["alert_rule_test"]}
    assert tested == set(alert_names())


def test_unit_tests_can_fail(tmp_path: Path) -> None:
    """The same tests against rules whose `for:` is 1h: the alerts expected at 6m are absent."""
    rules = tmp_path / "alerts.yml"
    rules.write_text(render_rules("1h"))
    tests = yaml.safe_load((HERE / "alerts_test.yml").read_text())
    tests["rule_files"] = [str(rules)]
    (tmp_path / "t.yml").write_text(yaml.safe_dump(tests))
    r = promtool("test", "rules", tmp_path / "t.yml")
    assert r.returncode != 0 and "alertname: PctkNodeDrained, time: 6m" in r.stdout + r.stderr


def test_short_for_rewrites_only_durations(tmp_path: Path) -> None:
    text = render_rules("5s")
    fors = [r.get("for") for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    assert fors and set(fors) == {"5s"}
    (tmp_path / "r.yml").write_text(text)
    assert promtool("check", "rules", tmp_path / "r.yml").returncode == 0
    assert main(["observe", "rules", "--alert-for", "five"]) == 2


def test_twin_and_head_node_configs_pass_promtool(tmp_path: Path) -> None:
    rules = tmp_path / "pctk-alerts.yml"
    rules.write_text(render_rules())
    twin = tmp_path / "twin.yml"
    twin.write_text(render_prometheus_config(
        "p5_training", {"node": "127.0.0.1:9100", "slurm": "127.0.0.1:9877"}, rules, "5s"))
    r = promtool("check", "config", twin)
    assert r.returncode == 0, r.stdout + r.stderr

    head = tmp_path / "head.yml"
    assert main(["observe", "scrape-config", "p5-training", "-o", str(head)]) == 0
    cfg = yaml.safe_load(head.read_text())
    cfg["rule_files"] = [str(rules)]
    head.write_text(yaml.safe_dump(cfg))
    r = promtool("check", "config", head)
    assert r.returncode == 0, r.stdout + r.stderr
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(jobs) == {"node", "pctk-slurm", "dcgm"}
    (sd,) = jobs["node"]["ec2_sd_configs"]
    assert sd["filters"] == [{"name": "tag:parallelcluster:cluster-name",
                              "values": ["p5-training"]}]
    assert sd["region"] == "us-east-1" and sd["port"] == 9100
    assert jobs["dcgm"]["ec2_sd_configs"][0]["filters"][1] == {
        "name": "instance-type", "values": ["p5.48xlarge"]}  # the GPU queue only, not c5
