"""Cross-checks of printed figures: busbw = algbw x factor and algbw = size / time.

nccl-tests rounds every figure it prints (2 decimals, fewer for large values, ``%g``
notation past the column width). A row disagrees only when no pair of true values within
half a unit of the last printed digit satisfies the relation, so rounding never raises a
false alarm and a real mismatch (a wrong factor, a different algbw definition) always does.
"""

from __future__ import annotations

import math

from benchmarks.vocab import busbw_factor
from toolkit.bench.comm.model import CollectiveRun, Inconsistency, Measurement

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


def _fits(m: Measurement, key: str, value: float, target: tuple[float, float]) -> bool:
    return not _disjoint(_interval(m, key, value), target)


def old_prescaled_ranks(run: CollectiveRun) -> int | None:
    """n when every row follows the pre-2020 all_gather/reduce_scatter convention, else None.

    Builds from 2019 and before printed algbw = size x (n-1)/n / time and busbw = algbw for
    these two collectives (today: algbw = size / time, busbw = algbw x (n-1)/n). n is read
    from the ratio algbw / (size / time) = (n-1)/n and must be the same on every row.
    """
    if run.collective not in ("all_gather", "reduce_scatter") or not run.rows:
        return None
    ranks: set[int] = set()
    for row in run.rows:
        for m in (row.out_of_place, row.in_place):
            if m is None or m.time_us <= 0 or m.algbw_gbps <= 0:
                continue
            t_lo, t_hi = _interval(m, "time", m.time_us)
            if t_lo <= 0:
                return None
            plain = (row.size_bytes / t_hi / 1e3, row.size_bytes / t_lo / 1e3)
            if _fits(m, "algbw", m.algbw_gbps, plain):
                return None          # today's algbw = size / time holds
            ratio = m.algbw_gbps / (row.size_bytes / m.time_us / 1e3)
            if not 0.0 < ratio < 1.0:
                return None
            n = round(1.0 / (1.0 - ratio))
            scaled = (n - 1) / n if n >= 2 else 0.0
            expect_alg = (plain[0] * scaled, plain[1] * scaled)
            if n < 2 or not (_fits(m, "algbw", m.algbw_gbps, expect_alg) and
                    _fits(m, "busbw", m.busbw_gbps, _interval(m, "algbw", m.algbw_gbps))):
                return None
            ranks.add(n)
    if len(ranks) != 1 or (run.nranks and ranks != {run.nranks}):
        return None
    return ranks.pop()


def check_consistency(run: CollectiveRun) -> tuple[list[Inconsistency], list[str]]:
    """Rows whose figures disagree beyond rounding, and notes on checks that could not run."""
    found: list[Inconsistency] = []
    notes: list[str] = []
    old_n = old_prescaled_ranks(run)
    if old_n is not None:
        # one note for the whole table instead of two disagreements per measurement
        return [], [f"old nccl-tests convention: {run.collective} algbw printed already "
                    f"scaled by (n-1)/n with n={old_n} and busbw = algbw (builds before 2020); "
                    "figures agree with it"]
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
