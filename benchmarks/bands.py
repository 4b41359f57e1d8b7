"""Every verdict band in one place: how far below its expected figure a measurement may fall
before it is a WARN or a FAIL, and how far a result may fall below its baseline before it is
a regression.

Standard library only (like :mod:`benchmarks.vocab`): the node side (the health checks under
``benchmarks/health``) imports it as the driver side does (``toolkit.bench``,
``toolkit.results``, the alert rules that ``toolkit.observe`` ships). A figure that judges a
measurement lives here, named, and nowhere else; where two judgements of the same measurement
differ, both bands are here and the comment says why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """A measurement against its expectation: ``ratio >= warn_below`` is PASS, below
    ``warn_below`` WARN, below ``fail_below`` FAIL."""

    warn_below: float
    fail_below: float

    def grade(self, ratio: float) -> str:
        if ratio < self.fail_below:
            return "FAIL"
        if ratio < self.warn_below:
            return "WARN"
        return "PASS"


# Collective bus bandwidth (nccl-tests or the torch sweep) against the catalog's figure
# (`pctk bench nccl`, its report and `pctk results report`). 90% matches nccl-tests' own `-a`
# check (it fails below 0.9 of the expected average); below 75% the gap is a fault, not noise.
BUSBW = Band(warn_below=0.90, fail_below=0.75)

# The same busbw judgement as a node's pre-flight check (`pctk health check --level full`,
# benchmarks/health/perf.py), a decision of its own: the node measures one all_reduce over its
# own GPUs only (NVLink, no network), at 1-4 GiB where the catalog figure holds with room to
# spare, so a node that reaches less than 80% of it is not fit to join a job; a cluster-wide
# benchmark crosses the network and keeps 75%. Both WARN below 90%. Overridable per run (the
# expectations file's "thresholds": nccl_warn_fraction, nccl_fail_fraction).
NODE_BUSBW = Band(warn_below=BUSBW.warn_below, fail_below=0.80)

# Shared-storage throughput against what the file system is provisioned for (`pctk bench
# storage`, and the PctkStorageBelowProvisioned alert, rendered from this band).
STORAGE = Band(warn_below=0.80, fail_below=0.50)

# Regression against a baseline (`pctk results compare`, `pctk bench nccl compare`, the
# report and the Prometheus textfile): a drop larger than this (relative) is a regression.
REGRESSION = 0.05
# Which busbw message sizes a comparison judges: at most the TOP_SIZES largest both runs
# measured, none smaller than the largest / SIZE_SPAN (small messages are latency-bound).
TOP_SIZES = 4
SIZE_SPAN = 64


def judged_sizes(common: Iterable[int], min_bytes: int = 0) -> list[int]:
    """The message sizes a busbw comparison judges, the one rule for `pctk results compare`
    and `pctk bench nccl compare`: the ``TOP_SIZES`` largest sizes both runs measured, none
    below the largest / ``SIZE_SPAN`` or below ``min_bytes`` (smaller messages are
    latency-bound and too noisy to judge bandwidth by)."""
    sizes = sorted(set(common))
    if not sizes:
        return []
    floor = max(sizes[-1] / SIZE_SPAN, min_bytes)
    return [s for s in sizes[-TOP_SIZES:] if s >= floor]


def is_drop(change: float | None, threshold: float) -> bool:
    """A fall by more than ``threshold`` (relative)."""
    return change is not None and change < -threshold
