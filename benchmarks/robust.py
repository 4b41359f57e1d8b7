"""Robust outliers: which one of several figures stands out from the others.

Torch-free, shared by both sides (the FSDP record's readers, the slow-node finder). A figure
is compared with the **median of the others** (so the suspect does not pull its own reference)
and with their spread, the median absolute deviation scaled to a standard deviation
(x 1.4826, floored at :data:`SPREAD_FLOOR` of the reference so that near-equal peers do not
make any small gap significant). A figure is an outlier only when it is both
``min_ratio`` times worse than the reference *and* ``k`` spreads away from it. With two
figures there is no spread: the ratio alone decides.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

MAD_TO_SD = 1.4826
SPREAD_FLOOR = 0.05  # of the reference
K_SPREADS = 4.0


@dataclass(frozen=True)
class Outlier:
    key: str
    value: float
    reference: float  # median of the others
    ratio: float  # how many times worse than the reference (>= 1)
    others: tuple[float, float]  # the lowest and highest of the others


def worst_outlier(values: Mapping[str, float], *, higher_is_worse: bool, min_ratio: float,
                  k: float = K_SPREADS) -> Outlier | None:
    """The key whose figure is the worst, when it stands out (see the module's doc)."""
    usable = {key: v for key, v in values.items() if v > 0}
    if len(usable) < 2:
        return None
    pick = max if higher_is_worse else min
    key = pick(usable, key=lambda x: usable[x])
    value = usable[key]
    others = [v for x, v in usable.items() if x != key]
    ref = statistics.median(others)
    ratio = value / ref if higher_is_worse else ref / value
    if ratio < min_ratio:
        return None
    if len(others) >= 2:
        spread = max(MAD_TO_SD * statistics.median(abs(v - ref) for v in others),
                     SPREAD_FLOOR * ref)
        if abs(value - ref) < k * spread:
            return None
    return Outlier(key, value, ref, ratio, (min(others), max(others)))
