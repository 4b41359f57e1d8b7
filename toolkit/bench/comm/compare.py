"""Change in busbw per message size between two runs, with regressions flagged.

Runs are paired by collective (and rank count where both know it). Every common size is
shown; which sizes may be flagged, and by how much a drop must exceed, is the results' one
rule (:func:`benchmarks.bands.judged_sizes`, ``benchmarks.bands.REGRESSION``), with ``min_bytes``
as an extra floor: small messages are latency-bound and vary by more than any useful
threshold between identical runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.bands import REGRESSION as DEFAULT_THRESHOLD
from benchmarks.bands import is_drop, judged_sizes
from toolkit.bench.comm.model import CollectiveRun

DEFAULT_MIN_BYTES = 1 << 20


@dataclass
class SizeChange:
    size_bytes: int
    before_gbps: float
    after_gbps: float
    change: float          # (after - before) / before; 0 when before is 0
    regression: bool


@dataclass
class Comparison:
    collective: str
    before: CollectiveRun
    after: CollectiveRun
    sizes: list[SizeChange] = field(default_factory=list)
    only_before: list[int] = field(default_factory=list)
    only_after: list[int] = field(default_factory=list)

    @property
    def regressions(self) -> list[SizeChange]:
        return [s for s in self.sizes if s.regression]


def _busbw_by_size(run: CollectiveRun) -> dict[int, float]:
    return {r.size_bytes: m.busbw_gbps for r in run.rows if (m := r.primary())}


def compare_runs(before: list[CollectiveRun], after: list[CollectiveRun], *,
                 threshold: float = DEFAULT_THRESHOLD,
                 min_bytes: int = DEFAULT_MIN_BYTES) -> tuple[list[Comparison], list[str]]:
    """Pair runs, compare per size; also return collectives found on one side only."""
    unmatched: list[str] = []
    out: list[Comparison] = []
    pool = list(after)
    for b in before:
        match = next((a for a in pool if a.collective == b.collective and
                      (not a.nranks or not b.nranks or a.nranks == b.nranks)), None)
        if match is None:
            unmatched.append(f"{b.collective} only in the first input")
            continue
        pool.remove(match)
        bb, ab = _busbw_by_size(b), _busbw_by_size(match)
        cmp = Comparison(b.collective or "?", b, match,
                         only_before=sorted(set(bb) - set(ab)),
                         only_after=sorted(set(ab) - set(bb)))
        common = set(bb) & set(ab)
        judged = set(judged_sizes(common, min_bytes))
        for size in sorted(common):
            x, y = bb[size], ab[size]
            change = (y - x) / x if x else 0.0
            cmp.sizes.append(SizeChange(size, x, y, change,
                                        size in judged and x > 0 and is_drop(change, threshold)))
        out.append(cmp)
    unmatched += [f"{a.collective} only in the second input" for a in pool]
    return out, unmatched
