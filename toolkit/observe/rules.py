"""The shipped alert rules (alerts.yml beside this file) and a copy with a shorter ``for:``.

Every rule that judges a measurement against its expected figure uses a band of
:mod:`benchmarks.bands`: ``render_rules`` (what `pctk observe rules` writes and a twin's
Prometheus loads) writes the band's value in place of the shipped file's figure.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from benchmarks.bands import STORAGE
from toolkit.errors import PctkError

RULES_FILE = Path(__file__).with_name("alerts.yml")
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
# where alerts.yml holds a band: the figure (group 1) and what replaces it
BANDS = (
    (re.compile(r"\(([0-9.]+) \* pctk_storage_expected_bytes_per_second\)"),
     f"{STORAGE.warn_below:g}"),
    (re.compile(r"under ([0-9.]+)% of the provisioned throughput"),
     f"{STORAGE.warn_below * 100:g}"),
)


def alert_names() -> list[str]:
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    return [r["alert"] for g in groups for r in g["rules"] if "alert" in r]


def render_rules(alert_for: str | None = None) -> str:
    """The rules file; with ``alert_for`` every alert's ``for:`` becomes that duration."""
    text = with_bands(RULES_FILE.read_text())
    if alert_for is None:
        return text
    if not DURATION.match(alert_for):
        raise PctkError(f"bad duration {alert_for!r}", "use a Prometheus duration: 30s, 5m, 1h")
    return re.sub(r"(?m)^(\s+for: )\S+$", rf"\g<1>{alert_for}", text)


def with_bands(text: str) -> str:
    """The rules with each band's figure from :mod:`benchmarks.bands`."""
    for pattern, value in BANDS:
        found = list(pattern.finditer(text))
        if not found:
            raise PctkError(f"the alert rules have no place for a band ({pattern.pattern})",
                            "keep the rule's expression as benchmarks/bands.py expects")
        for m in reversed(found):
            text = text[:m.start(1)] + value + text[m.end(1):]
    return text
