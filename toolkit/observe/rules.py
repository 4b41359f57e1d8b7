"""The shipped alert rules (alerts.yml beside this file) and a copy with a shorter ``for:``."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from toolkit.errors import PctkError

RULES_FILE = Path(__file__).with_name("alerts.yml")
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def alert_names() -> list[str]:
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    return [r["alert"] for g in groups for r in g["rules"] if "alert" in r]


def render_rules(alert_for: str | None = None) -> str:
    """The rules file; with ``alert_for`` every alert's ``for:`` becomes that duration."""
    text = RULES_FILE.read_text()
    if alert_for is None:
        return text
    if not DURATION.match(alert_for):
        raise PctkError(f"bad duration {alert_for!r}", "use a Prometheus duration: 30s, 5m, 1h")
    return re.sub(r"(?m)^(\s+for: )\S+$", rf"\g<1>{alert_for}", text)
