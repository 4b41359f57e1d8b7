"""PASS / WARN / FAIL for one collective run, with the reasons.

Rules, worst first:

- FAIL: wrong values (any ``#wrong`` > 0, an old-format ``error`` above nccl-tests' own
  tolerance, ``Out of bounds values : N FAILED``, or torch correctness checks);
- FAIL: the run did not finish (no footer; crash lines are quoted);
- FAIL: NCCL used sockets (``NET/Socket``, ``Using network Socket``), a mix of transports or
  libfabric on a non-EFA provider, on more than one host or an unknown number of hosts
  (WARN on a single host, where no inter-node traffic exists);
- busbw at large messages (the best out-of-place busbw at sizes >= the expectation's size)
  against the catalog's expectation for the instance type and node count, by the band
  :data:`benchmarks.bands.BUSBW`: below ``FAIL_BELOW`` (75%) is FAIL, below ``WARN_BELOW``
  (90%) is WARN. 90% matches nccl-tests' own ``-a`` check (it fails below 0.9 of the
  expected average); 75% is where the gap is larger than run-to-run noise on EFA (published
  p5 2-node all_reduce spans 440-490 GB/s, about +-5%) and points at a broken rail, a wrong
  NCCL/aws-ofi-nccl build or a fallback;
- FAIL: the run measured nothing between ranks: several processes each ran alone (rank 0
  printed by each, sizes repeated: a binary built without MPI launched as N processes),
  device lines and NCCL INFO disagree on the rank count, the rank count differs from what
  was launched, or busbw is 0 everywhere on more than one launched rank (WARN for a run
  launched on one rank, where busbw is 0 by definition);
- WARN: figures that disagree beyond rounding (busbw vs algbw x factor, algbw vs size/time).

If the sweep stopped below the expectation's message size, bandwidth is not judged and a
reason says so. No expectation (unknown instance type, catalog without a figure): no
bandwidth verdict, and the reasons say that too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchmarks.bands import BUSBW
from toolkit import catalog
from toolkit.bench.comm.model import CollectiveRun

WARN_BELOW = BUSBW.warn_below
FAIL_BELOW = BUSBW.fail_below
_ORDER = {"PASS": 0, "UNKNOWN": 1, "WARN": 2, "FAIL": 3}
# nccl-tests' DeltaMaxValue (per element, scaled by nranks - 1) for the old 'error' column
_DELTA_MAX = {"half": 1e-2, "float16": 1e-2, "bfloat16": 1e-2, "float": 1e-5,
              "float32": 1e-5, "double": 1e-12, "float64": 1e-12}


@dataclass(frozen=True)
class Expectation:
    """Expected busbw at large messages (mirrors toolkit.catalog's Expectation)."""

    gbps: float
    size_bytes: int | None      # None: the source states no message size
    source: str
    note: str = ""
    algo: str | None = None     # NCCL algorithm of the published figure; None: not stated


@dataclass
class Verdict:
    status: str = "PASS"
    reasons: list[str] = field(default_factory=list)

    def add(self, status: str, reason: str) -> None:
        if _ORDER[status] > _ORDER[self.status]:
            self.status = status
        self.reasons.append(f"{status}: {reason}")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reasons": list(self.reasons)}


def worst(statuses: list[str]) -> str:
    return max(statuses, key=lambda s: _ORDER[s]) if statuses else "UNKNOWN"


def lookup_expectation(instance_type: str | None, nodes: int | None, collective: str,
                       largest_size: int | None = None,
                       algorithm: str | None = None) -> Expectation | None:
    """The catalog's expectation, or None (catalog absent, type unknown, no figure).

    ``largest_size`` asks for the largest published size not above what the run sent, so
    a sweep to 2 GiB is not judged against a 16 GiB figure. ``algorithm`` is the NCCL algorithm
    the run used (NCCL_ALGO or the INFO lines); None (unknown) takes the most lenient
    figure, and the note says so.
    """
    if not instance_type or not nodes:
        return None
    try:
        exp = catalog.busbw_expectation(instance_type, collective, nodes, algorithm,
                                        size_bytes=largest_size)
        if exp is None and largest_size is not None:
            exp = catalog.busbw_expectation(instance_type, collective, nodes, algorithm)
        sources = catalog.sources() if hasattr(catalog, "sources") else {}
    except Exception:  # unknown type or collective: treated as "no expectation"
        return None
    if exp is None:
        return None
    where = str(exp.source)
    if sources.get(where):
        where = f"{where}: {sources[where]}"
    size = getattr(exp, "size_bytes", None)
    note = "; ".join(x for x in (exp.algo and f"{exp.algo} figure", exp.basis, exp.note) if x)
    return Expectation(float(exp.gbps), int(size) if size else None, where, note, exp.algo)


def _wrong_values(run: CollectiveRun) -> list[str]:
    reasons = []
    wrong = sum((m.wrong or 0) for r in run.rows for m in (r.out_of_place, r.in_place) if m)
    if wrong:
        reasons.append(f"{wrong} wrong elements (#wrong column)")
    scale = max(1, (run.nranks or 2) - 1)
    bad = [(r.size_bytes, m.error) for r in run.rows for m in (r.out_of_place, r.in_place)
           if m and m.error is not None and m.error > _DELTA_MAX.get(r.dtype, 0.0) * scale]
    if bad:
        reasons.append(f"error column above tolerance at {len(bad)} measurements "
                       f"(max {max(e for _, e in bad):g} at {bad[0][0]} B)")
    oob = run.out_of_bounds
    if oob and (oob.get("status") == "FAILED" or oob.get("count")):
        reasons.append(f"Out of bounds values : {oob.get('count')} {oob.get('status')}")
    return reasons


def _all_busbw_zero(run: CollectiveRun) -> bool:
    ms = [m for r in run.rows for m in (r.out_of_place, r.in_place) if m]
    return bool(ms) and all(m.busbw_gbps == 0 for m in ms) and any(m.algbw_gbps > 0 for m in ms)


def _rank_problems(run: CollectiveRun, expected_ranks: int | None) -> list[tuple[str, str]]:
    """A run that did not span the ranks it was launched on measured nothing between them."""
    found: list[tuple[str, str]] = []
    if run.format in ("torch", "json") and not expected_ranks:
        return found
    if run.separate_processes > 1:
        found.append(("FAIL", f"measured nothing: {run.separate_processes} processes each "
                              "ran the test alone (their outputs are interleaved: rank 0 "
                              "printed by each, tables repeated); nccl-tests built without "
                              "MPI, or launched without MPI wiring, cannot join processes"))
    elif run.repeated_sizes:
        found.append(("FAIL", f"measured nothing together: {run.repeated_sizes} rows repeat a "
                              "size already measured (several independent runs interleaved, "
                              "e.g. a binary built without MPI launched as N processes)"))
    split = any("NCCL_TESTS_SPLIT" in n for n in run.notes)
    devices = len({d.rank for d in run.devices}) if run.devices else None
    if devices and run.info_nranks and not split and max(run.info_nranks) != devices:
        found.append(("FAIL", f"rank count disagrees: device lines list {devices} ranks, "
                              f"NCCL INFO says nranks {max(run.info_nranks)}"))
    if expected_ranks and run.nranks and run.nranks != expected_ranks:
        found.append(("FAIL", f"rank count disagrees with the launch: {run.nranks} ranks "
                              f"({run.nranks_source}), {expected_ranks} launched"))
    if not found and _all_busbw_zero(run):
        if expected_ranks and expected_ranks > 1:
            found.append(("FAIL", "measured nothing: busbw 0 at every size (one rank per "
                                  f"communicator) while {expected_ranks} ranks were launched"))
        elif run.nranks == 1:
            found.append(("WARN", "one rank: busbw is 0 by definition, nothing between GPUs "
                                  "was measured"))
        else:
            found.append(("FAIL", "measured nothing: busbw 0 at every size although algbw is "
                                  "not (each process had a one-rank communicator)"))
    return found


def judge(run: CollectiveRun, expectation: Expectation | None = None,
          nodes: int | None = None, expected_ranks: int | None = None) -> Verdict:
    v = Verdict()
    name = run.collective or "collective"
    if run.unsupported:
        v.add("WARN", f"{name} not measured: {run.unsupported}")
        return v
    for reason in _wrong_values(run):
        v.add("FAIL", reason)
    for status, reason in _rank_problems(run, expected_ranks):
        v.add(status, reason)
    if not run.complete:
        got = f"{len(run.rows)} sizes measured" + (
            f", last {run.largest().size_bytes} B" if run.rows else "")  # type: ignore[union-attr]
        why = "; ".join(run.failure_lines[:3]) or "no failure lines in the log"
        v.add("FAIL", f"incomplete run (no footer): {got}; {why}")
    hosts = nodes or (len(run.hosts) or None)
    transport = run.network.transport
    if transport in ("socket", "mixed") or transport.startswith("ofi-"):
        what = {"socket": "NCCL fell back to sockets (NET/Socket), not EFA",
                "mixed": "ranks used different networks"}.get(
                    transport, f"libfabric provider {transport[4:]}, not efa")
        if hosts == 1:
            v.add("WARN", f"{what}; harmless on one host, fatal across nodes")
        else:
            v.add("FAIL", what)
    elif transport == "unknown" and run.format != "torch":
        v.reasons.append("note: no NCCL_DEBUG=INFO network lines; EFA use not verified")
    elif transport not in ("efa", "unknown"):
        v.reasons.append(f"note: network {transport} (not EFA)")
    for note in run.notes:
        if note.startswith(("old nccl-tests convention", "no column header")):
            v.reasons.append(f"note: {note}")
    if run.algorithm:
        v.reasons.append(f"note: NCCL algorithm {run.algorithm} ({run.algorithm_source})")
    if run.inconsistencies:
        first = run.inconsistencies[0]
        v.add("WARN", f"{len(run.inconsistencies)} figures disagree beyond rounding "
                      f"(first: {first.check} at {first.size_bytes} B {first.placement}: "
                      f"{first.reported:g} vs {first.expected:.4g})")
    _judge_bandwidth(v, run, expectation)
    return v


def _judge_bandwidth(v: Verdict, run: CollectiveRun, exp: Expectation | None) -> None:
    if exp is None:
        v.reasons.append("note: no busbw expectation for this instance type and node count")
        return
    floor = exp.size_bytes or 0
    large = [r for r in run.rows if r.size_bytes >= floor and r.primary()]
    if not large:
        top = run.largest()
        v.reasons.append(f"note: busbw not judged: largest size {top.size_bytes if top else 0} B "
                         f"is below the expectation's {floor} B")
        return
    best = max(r.primary().busbw_gbps for r in large)  # type: ignore[union-attr]
    ratio = best / exp.gbps if exp.gbps else 0.0
    at = f">= {exp.size_bytes} B" if exp.size_bytes else "any size (source states none)"
    text = (f"busbw {best:.1f} GB/s at {at} is {ratio:.0%} of expected {exp.gbps:g} GB/s "
            f"({exp.source}{'; ' + exp.note if exp.note else ''})")
    if ratio < FAIL_BELOW:
        v.add("FAIL", text + f" < {FAIL_BELOW:.0%}")
    elif ratio < WARN_BELOW:
        v.add("WARN", text + f" < {WARN_BELOW:.0%}")
    else:
        v.reasons.append("ok: " + text)
