"""A scaling study from FSDP records at several node counts: measured efficiency, the
prediction beside it, and the record that links them (kind ``scaling``).

Efficiency at N nodes is per-GPU throughput at N over per-GPU throughput at the smallest
size (weak and strong scaling alike: 1.0 is perfect), each at the run's median step time.
The prediction starts from the smallest size's measured step (step_1, its compute part
compute_1) and adds the communication the bigger size needs beyond the base's,
``extra = max(0, comm_N - comm_1)``,
each the time of FSDP's traffic (:func:`benchmarks.modelmath.fsdp_step`) at a bus bandwidth
(:func:`busbw_for`; comm_1 is 0 for one rank):

- without overlap: ``step_1 - compute_1 + compute_N + extra``;
- with full overlap: ``step_1 - compute_1 + compute_N + max(0, extra - compute_N)``;

where strong scaling divides compute_1 by the growth in ranks (the global batch is split over
more GPUs) and weak scaling keeps it. The bus bandwidth for N nodes comes from the newest stored
nccl-tests or collectives record of the same cluster at N nodes (each of all_gather,
reduce_scatter and all_reduce at its own best busbw, a collective it lacks at the first of
those it has; groups inside a node, HSDP's shards, at a stored 1-node record's figures), else
the catalog's published figure for the instance type at N nodes (all_reduce: the only
collective published; nccl-tests' busbw makes the collectives comparable), else the run's own
link probe (median per-rank receive GB/s).
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks import record as records
from benchmarks.modelmath import step_seconds
from toolkit import catalog
from toolkit.results import diagnose
from toolkit.results.diagnose import Busbw
from toolkit.results.metrics import BUSBW_KINDS, busbw_curves
from toolkit.results.store import ResultStore, group_key

GAP_FINDING = 0.25  # measured efficiency this far below the no-overlap prediction is a finding
PREFERRED = ("all_gather", "reduce_scatter", "all_reduce")


def _best_busbw(rec: dict[str, Any], store: ResultStore, nodes: int
                ) -> tuple[dict[str, float], str] | None:
    """The newest stored nccl-tests or collectives record of ``rec``'s cluster at ``nodes``
    node(s) that has FSDP's collectives: the best busbw of each, and where it came from."""
    key = group_key(rec)
    for kind in BUSBW_KINDS:
        for stored in store.list(kind=kind):
            if group_key(stored) != key or (stored.get("cluster") or {}).get("nodes") != nodes:
                continue
            curves = busbw_curves(stored, comparable_only=True)
            best = {name: max(p.busbw for p in curves[name]) for name in PREFERRED
                    if curves.get(name)}
            best = {name: gb for name, gb in best.items() if gb > 0}
            if best:
                return best, (f"stored {kind} record {stored['id'][:8]}: best "
                              f"{'/'.join(best)} busbw at {nodes} node(s)")
    return None


def busbw_for(rec: dict[str, Any], store: ResultStore | None) -> Busbw | None:
    """The bus bandwidth FSDP's collectives would see on ``rec``'s cluster and node count:
    each collective at its own best busbw where a stored record has it, and groups inside a
    node (HSDP's shards) at a stored one-node record's figures (NVLink)."""
    nodes = (rec.get("params") or {}).get("nodes") or 1
    intra: dict[str, float] = {}
    if store is not None:
        if nodes > 1 and (one := _best_busbw(rec, store, 1)) is not None:
            intra = one[0]
        if (found := _best_busbw(rec, store, nodes)) is not None:
            best, source = found
            if intra:
                source += "; groups inside a node at the stored 1-node figures"
            return Busbw(next(iter(best.values())), source, per_collective=best,
                         intra_node=intra)
    itype = (rec.get("cluster") or {}).get("instance_type")
    if itype:
        exp = catalog.busbw_expectation(itype, "all_reduce", nodes)
        if exp is not None:
            return Busbw(exp.gbps, f"catalog: {itype} all_reduce at {nodes} node(s), "
                                   f"source {exp.source}", intra_node=intra)
    links = [r.get("link_recv_gb_per_s") for r in
             ((rec.get("metrics") or {}).get("breakdown") or {}).get("per_rank") or []]
    figures = [x for x in links if isinstance(x, int | float) and x > 0]
    if figures:
        return Busbw(statistics.median(figures),
                     "this run's link probe (median receive GB/s per rank): no stored "
                     "nccl-tests/collectives record and no catalog figure for it")
    return None


def _tokens_per_gpu_s(rec: dict[str, Any]) -> float | None:
    """Per-GPU tokens/s at the median step time: a few slow steps (a busy host, a
    checkpoint) do not decide a scaling efficiency."""
    m, p = rec.get("metrics") or {}, rec.get("params") or {}
    p50, local = m.get("step_time_p50_s"), p.get("local_batch_size")
    if isinstance(p50, int | float) and p50 > 0 and isinstance(local, int) and p.get("seq_len"):
        return local * p["seq_len"] / p50
    value = m.get("tokens_per_s_per_gpu")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def predict(base: dict[str, Any], rec: dict[str, Any], busbw: Busbw | None,
            base_busbw: Busbw | None, strong: bool) -> dict[str, Any]:
    """Predicted step and efficiency of ``rec``'s size from the base size's breakdown."""
    mean = base["metrics"]["breakdown"]["mean_over_ranks"]
    p_base, p = base["params"], rec["params"]
    if busbw is None:
        return {"busbw_gb_per_s": None, "busbw_source": "none: no stored record, catalog "
                "figure or link probe", "comm_s": None, "efficiency_no_overlap": None,
                "efficiency_overlap": None}
    comm = step_seconds(diagnose.transfers_of(rec), busbw.of)
    base_transfers = diagnose.transfers_of(base)
    base_comm = (step_seconds(base_transfers, (base_busbw or busbw).of)
                 if any(t.bus_bytes for t in base_transfers) else 0.0)
    scale = p["world_size"] / p_base["world_size"] if strong else 1.0
    compute = mean["compute"] / scale
    extra = max(0.0, comm - base_comm)  # what the bigger size adds to the base's traffic
    # the base's step less the compute the bigger size no longer does: exactly the base's step
    # at the base's size ((a - b) + b need not be a in floating point)
    same = mean["step"] - (mean["compute"] - compute)
    no_overlap = same + extra
    overlap = same + max(0.0, extra - compute)

    def eff(step: float) -> float:
        """Per-GPU throughput relative to the base's. The prediction only adds costs to the
        base's step, so it is at most 1; the bound holds against a last-bit rounding too."""
        return min(1.0, mean["step"] / scale / step) if step > 0 else 0.0

    return {"busbw_gb_per_s": busbw.gb_per_s, "busbw_source": busbw.source, "comm_s": comm,
            "base_comm_s": base_comm, "step_no_overlap_s": no_overlap,
            "step_overlap_s": overlap, "efficiency_no_overlap": eff(no_overlap),
            "efficiency_overlap": eff(overlap)}


def study(recs: list[dict[str, Any]], *, strong: bool, store: ResultStore | None = None
          ) -> dict[str, Any]:
    """Per-size rows (smallest first) and the overall verdict, from FSDP records."""
    recs = sorted(recs, key=lambda r: r["params"]["nodes"])
    base = recs[0]
    base_rate = _tokens_per_gpu_s(base)
    sizes = []
    for rec in recs:
        verdict = diagnose.diagnose(rec, busbw_for(rec, store))
        rate = _tokens_per_gpu_s(rec)
        measured = rate / base_rate if rate and base_rate else None
        pred = predict(base, rec, busbw_for(rec, store), busbw_for(base, store), strong)
        row = {"nodes": rec["params"]["nodes"], "world_size": rec["params"]["world_size"],
               "record_id": rec["id"], "status": rec["verdict"]["status"],
               "tokens_per_s_per_gpu": rate, "step_s": verdict["breakdown_s"]["step"],
               "efficiency": measured, "predicted": pred, "breakdown_s": verdict["breakdown_s"],
               "diagnosis": verdict}
        gap = (pred["efficiency_no_overlap"] - measured
               if measured is not None and pred["efficiency_no_overlap"] is not None else None)
        row["gap_vs_no_overlap"] = gap
        sizes.append(row)
    last = sizes[-1]["diagnosis"]
    evidence = list(last["evidence"])
    if len(sizes) > 1:
        first, top = sizes[0]["breakdown_s"], sizes[-1]["breakdown_s"]
        if first.get("compute") and top.get("compute"):
            evidence.insert(1, f"compute per rank: {first['compute'] * 1000:.1f} ms at "
                            f"{sizes[0]['nodes']} node(s), {top['compute'] * 1000:.1f} ms at "
                            f"{sizes[-1]['nodes']} ({top['compute'] / first['compute']:.1f}x"
                            + (", for the same work per rank" if not strong else "") + ")")
    findings = [f"{s['nodes']} node(s): measured efficiency {s['efficiency']:.0%}, predicted "
                f"{s['predicted']['efficiency_no_overlap']:.0%} without overlap"
                for s in sizes if s["gap_vs_no_overlap"] is not None
                and s["gap_vs_no_overlap"] > GAP_FINDING]
    return {"mode": "strong" if strong else "weak", "sizes": sizes,
            "bottleneck": last["bottleneck"], "node": last["node"],
            "summary": last["summary"], "evidence": evidence, "advice": last["advice"],
            "prediction_gaps": findings}


def scaling_record(recs: list[dict[str, Any]], result: dict[str, Any],
                   params: dict[str, Any]) -> dict[str, Any]:
    """The ``scaling`` record linking the per-size FSDP records."""
    twin = any((r.get("cluster") or {}).get("twin") for r in recs)
    failed = [s["nodes"] for s in result["sizes"] if s["status"] == "FAIL"]
    reasons = [f"bottleneck: {result['bottleneck']}"
               + (f" ({result['node']})" if result["node"] else "") + f": {result['summary']}"]
    status = "PASS"
    if failed:
        status, reasons = "FAIL", [f"the run at {failed} node(s) failed", *reasons]
    elif result["prediction_gaps"] and not twin:
        status = "WARN"
        reasons += [f"below prediction: {g}" for g in result["prediction_gaps"]]
    elif result["bottleneck"] in ("straggler", "storage") or result["node"]:
        status = "WARN"
    base = recs[0]
    cluster = {k: v for k, v in (base.get("cluster") or {}).items()
               if k in ("name", "instance_type", "partition", "twin")}
    cluster["nodes"] = max(r["params"]["nodes"] for r in recs)
    rec = records.new_record("scaling", params={
        **params, "nodes": [r["params"]["nodes"] for r in recs],
        "records": [r["id"] for r in recs]}, metrics=result, status=status, reasons=reasons,
        cluster=cluster)
    return rec
