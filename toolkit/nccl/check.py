"""Cross-checks of printed figures: busbw = algbw x factor and algbw = size / time.

nccl-tests rounds every figure it prints (2 decimals, fewer for large values, ``%g``
notation past the column width). A row disagrees only when no pair of true values within
half a unit of the last printed digit satisfies the relation, so rounding never raises a
false alarm and a real mismatch (a wrong factor, a different algbw definition) always does.
"""

from __future__ import annotations

import math

from benchmarks.collectives import busbw_factor
from toolkit.nccl.model import CollectiveRun, Inconsistency, Measurement

# figures read from JSON (or measured) carry no printed rounding: allow float noise only
_EXACT_HALF_ULP_REL = 1e-6


def half_ulp(text: str | None, value: float) -> float:
    """Half a unit of the last printed digit of ``text`` (``'0.05'`` -> 0.005)."""
    if not text:
        return abs(value) * _EXACT_HALF_ULP_REL + 1e-9
    t = text.strip().lower()
    exp = 0
    if "e" in t:
        t, e = t.split("e", 1)
        exp = int(e)
    decimals = len(t.split(".", 1)[1]) if "." in t else 0
    return 0.5 * 10.0 ** (exp - decimals)


def _interval(m: Measurement, key: str, value: float) -> tuple[float, float]:
    h = half_ulp(m.text.get(key), value)
    return value - h, value + h


def _disjoint(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[1] < b[0] - 1e-12 or b[1] < a[0] - 1e-12


def check_consistency(run: CollectiveRun) -> tuple[list[Inconsistency], list[str]]:
    """Rows whose figures disagree beyond rounding, and notes on checks that could not run."""
    found: list[Inconsistency] = []
    notes: list[str] = []
    factor: float | None = None
    if run.collective and run.nranks:
        factor = busbw_factor(run.collective, run.nranks)
    elif run.rows:
        why = "collective" if not run.collective else "rank count"
        notes.append(f"busbw/algbw factor not checked: {why} unknown")
    for row in run.rows:
        for placement in ("out_of_place", "in_place"):
            m: Measurement | None = getattr(row, placement)
            if m is None:
                continue
            alg = _interval(m, "algbw", m.algbw_gbps)
            if factor is not None:
                bus = _interval(m, "busbw", m.busbw_gbps)
                if _disjoint(bus, (alg[0] * factor, alg[1] * factor)):
                    found.append(Inconsistency(row.size_bytes, placement, "busbw=algbw*factor",
                                               m.busbw_gbps, m.algbw_gbps * factor))
            t_lo, t_hi = _interval(m, "time", m.time_us)
            if t_lo <= 0 or math.isinf(t_hi):
                continue
            # GB/s from bytes and microseconds: bytes / us / 1e3
            from_time = (row.size_bytes / t_hi / 1e3, row.size_bytes / t_lo / 1e3)
            if _disjoint(alg, from_time):
                found.append(Inconsistency(row.size_bytes, placement, "algbw=size/time",
                                           m.algbw_gbps, row.size_bytes / m.time_us / 1e3))
    return found, notes
