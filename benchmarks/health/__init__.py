"""Node-side health checks: one small function per check, one uniform result.

Standard library only (``pynvml`` is imported if present), so the same code runs inside a
Slurm job step (``pctk health run``), a Slurm prolog/epilog and a lean container. Each check
returns a :class:`~benchmarks.health.status.CheckResult` with status ``OK``, ``WARN``,
``FAIL`` or ``SKIP`` (tool or hardware absent: never ``OK``), the measured value, the
expectation, a message and a remedy. Per-SKU expectations arrive as data (an expectations
file written by the driver from the instance catalog); thresholds live in
``thresholds.json`` beside this file.

    python -m benchmarks.health --level quick --expect expect.json --out-dir results/
"""

from __future__ import annotations

from benchmarks.health.status import FAIL, OK, SKIP, STATUSES, WARN, CheckResult

__all__ = ["FAIL", "OK", "SKIP", "STATUSES", "WARN", "CheckResult"]
