"""What to do after a run: one ``next:`` line per record, by its kind and verdict.

Every benchmark and health command ends with it, so a figure comes with the step it leads to:
a failed sweep to the node finder, a training run to its diagnosis, a passing run to a
baseline that later runs are held to.
"""

from __future__ import annotations

import re
from typing import Any

from toolkit.results.metrics import health_matrix


def _blamed(rec: dict[str, Any]) -> str | None:
    """The node a record blames, if any: a health check's failed node, a slow-node sweep's
    ``SLOW node:`` reason, or a ParallelCluster node name in the first reason naming one."""
    if rec.get("kind") == "health":
        failed = sorted(node for node, row in health_matrix(rec).items()
                        if any(cell.status == "FAIL" for cell in row.values()))
        return failed[0] if failed else None
    reasons = [str(r) for r in (rec.get("verdict") or {}).get("reasons") or []]
    if rec.get("kind") == "slow-nodes":
        for reason in reasons:
            if (m := re.match(r"(SLOW|FAIL|UNRESOLVED) (\S+):", reason)):
                return m.group(2)
    for reason in reasons:
        for word in reason.replace(":", " ").replace(",", " ").split():
            if "-st-" in word or "-dy-" in word:
                return word
    return None


def next_step(rec: dict[str, Any]) -> str:
    """One line, starting ``next:``, for a record's reader."""
    kind = rec.get("kind")
    status = (rec.get("verdict") or {}).get("status")
    rid = str(rec.get("id", ""))[:12]
    partition = (rec.get("cluster") or {}).get("partition")
    part = f" -p {partition}" if partition else ""
    node = _blamed(rec)
    if kind == "fsdp":
        if status in ("WARN", "FAIL") and node:
            return (f"next: pctk diagnose {rid} (the evidence), then pctk health drain {node} "
                    "and run again without it")
        return (f"next: pctk diagnose {rid} says what bounds the step; pctk bench scaling "
                f"--nodes 1,2,4{part} how it scales; pctk plan --from-record {rid} what a "
                "full run costs")
    if kind == "scaling":
        return f"next: pctk diagnose {rid} (the largest size's bottleneck, node and advice)"
    if kind in ("nccl-tests", "collectives", "storage", "inference", "serving"):
        if status == "FAIL":
            find = (f"pctk health slow-nodes{part} finds the node that holds the others back"
                    if kind in ("nccl-tests", "collectives") else
                    f"pctk health run{part} checks the nodes")
            return f"next: {find}; pctk results compare {rid} against earlier runs"
        return (f"next: pctk results baseline {rid} holds later runs to these figures; "
                "pctk report for the whole picture")
    if kind in ("health", "slow-nodes"):
        if status == "FAIL" and node:
            return (f"next: pctk health drain {node} (ParallelCluster replaces a drained static "
                    "node), then run this again")
        return "next: pctk report; run this again after a driver, AMI or node-group change"
    return "next: pctk report"
