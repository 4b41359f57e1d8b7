"""One rule for a summary verdict: the worst status over the newest run of every kind.

The HTML report's overall line, the exit code of ``pctk report``, ``pctk results list``'s
closing line and the Prometheus ``pctk_overall_verdict_status`` gauge all come from here, so
a FAIL of any kind (a slow-node sweep, a scaling study) is never summed into a PASS.
A regression against a baseline lifts a PASS to WARN: the checks passed, but the numbers fell.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchmarks.record import KINDS
from toolkit.results.store import group_key

# best to worst
ORDER = ("PASS", "UNKNOWN", "WARN", "FAIL")


def status_of(record: dict[str, Any]) -> str:
    status = str((record.get("verdict") or {}).get("status") or "UNKNOWN")
    return status if status in ORDER else "UNKNOWN"


def latest_of_each(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest record of each kind and (cluster, instance type), from records listed
    newest first; every kind counts, in the order of :data:`benchmarks.record.KINDS`."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for record in records:
        if record.get("kind") in KINDS:
            seen.setdefault((record["kind"], *group_key(record)), record)
    return [seen[key] for key in sorted(seen, key=lambda k: (KINDS.index(k[0]), k))]


def overall(latest: list[dict[str, Any]], regressions: int = 0) -> str:
    """The worst status of ``latest`` (UNKNOWN when there is none); a regression makes a
    PASS or UNKNOWN a WARN."""
    worst = max((status_of(r) for r in latest), key=ORDER.index, default="UNKNOWN")
    if regressions and ORDER.index(worst) < ORDER.index("WARN"):
        worst = "WARN"
    return worst
