"""Combine the per-node results into one ``storage`` record.

Throughput is stonewalled: every phase starts on all nodes together (a barrier), so the
aggregate is the bytes of all nodes over the slowest node's time, never a sum of per-node
rates measured over different intervals. Each node's time is fio's own runtime for the
phase (the longest of its jobs), which leaves out fio's start-up. MB is 10^6 bytes, the
unit AWS uses for FSx throughput.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.record import new_record, write_record
from benchmarks.storage.fio import percentile_of_bins

MB = 1_000_000
THROUGHPUT_PHASES = ("seq_write", "seq_read", "seq_write_shared", "seq_read_shared",
                     "ckpt_write", "ckpt_read")
META_PHASES = ("meta_create", "meta_stat", "meta_remove")


def base_phase(phase: str) -> str:
    """``seq_read@4M`` -> ``seq_read``: a block-size sweep's phase is named after its size."""
    return phase.split("@", 1)[0]


def _rate(amount: float, seconds: float) -> float | None:
    return amount / seconds if seconds > 0 else None


def throughput(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    total = sum(n["bytes"] for n in nodes.values())
    slowest = max(n["seconds"] for n in nodes.values())
    rate = _rate(total, slowest)
    walls = [n["wall_s"] for n in nodes.values() if isinstance(n.get("wall_s"), int | float)]
    return {
        "total_bytes": total, "slowest_node_s": slowest,
        "mb_per_s": rate / MB if rate is not None else None,
        # from the barrier to fio's exit, start-up included: a bound on what fio's own
        # runtime leaves out
        "slowest_node_wall_s": max(walls) if walls else None,
        "per_node": {name: {"bytes": n["bytes"], "seconds": n["seconds"],
                            "mb_per_s": (_rate(n["bytes"], n["seconds"]) or 0) / MB}
                     for name, n in sorted(nodes.items())},
    }


def merged_latency(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """p50/p99 completion latency over every I/O of every node: the nodes' fio histograms
    (``json+`` bins, the ones fio computes its own percentiles from) summed, then read with
    fio's rule. None, and said so, when a node's report carried no bins."""
    summed: Counter[int] = Counter()
    for figures in nodes.values():
        bins = figures.get("clat_bins_ns")
        if not isinstance(bins, list):
            return {"lat_p50_us": None, "lat_p99_us": None,
                    "lat_merged_from": "not merged: a node's fio report has no histogram"}
        for value, count in bins:
            summed[int(value)] += int(count)
    p50, p99 = (percentile_of_bins(summed.items(), pct) for pct in (50, 99))
    return {"lat_p50_us": p50 / 1000 if p50 is not None else None,
            "lat_p99_us": p99 / 1000 if p99 is not None else None,
            "lat_merged_from": f"fio completion-latency histograms of {len(nodes)} node(s), "
                               f"{sum(summed.values())} I/Os"}


def random_reads(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    total = sum(n["ios"] for n in nodes.values())
    slowest = max(n["seconds"] for n in nodes.values())
    p50 = [n["lat_p50_us"] for n in nodes.values() if n["lat_p50_us"] is not None]
    p99 = [n["lat_p99_us"] for n in nodes.values() if n["lat_p99_us"] is not None]
    return {
        "total_ios": total, "total_bytes": sum(n["bytes"] for n in nodes.values()),
        "slowest_node_s": slowest, "iops": _rate(total, slowest),
        # percentiles over all nodes' I/Os, from their merged histograms
        **merged_latency(nodes),
        # and of the per-node percentiles fio printed: the median node's p50, the worst p99
        "lat_p50_us_median_node": statistics.median(p50) if p50 else None,
        "lat_p99_us_worst_node": max(p99) if p99 else None,
        "per_node": {name: {"ios": n["ios"], "seconds": n["seconds"], "iops": n["iops"],
                            "lat_p50_us": n["lat_p50_us"], "lat_p99_us": n["lat_p99_us"]}
                     for name, n in sorted(nodes.items())},
    }


def metadata_rates(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    files = sum(n["files"] for n in nodes.values())
    slowest = max(n["seconds"] for n in nodes.values())
    return {"total_files": files, "slowest_node_s": slowest, "per_s": _rate(files, slowest),
            "per_node": {name: {"files": n["files"], "seconds": n["seconds"],
                                "per_s": _rate(n["files"], n["seconds"])}
                         for name, n in sorted(nodes.items())}}


def metrics_from(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The record's metrics from the node results (``node-NAME.json`` contents)."""
    by_phase: dict[str, dict[str, dict[str, Any]]] = {}
    for res in results:
        for phase, figures in res["phases"].items():
            by_phase.setdefault(phase, {})[res["node"]] = figures
    metrics: dict[str, Any] = {
        "direct_io": all(r.get("direct") for r in results),
        "direct_io_per_node": {r["node"]: bool(r.get("direct")) for r in results},
        "fio_version": next((f["fio_version"] for p in by_phase.values() for f in p.values()
                             if f.get("fio_version")), None),
    }
    for phase, nodes in by_phase.items():
        if base_phase(phase) in THROUGHPUT_PHASES:  # seq_read, or seq_read@4M of a sweep
            metrics[phase] = throughput(nodes)
            blocks = {n.get("block") for n in nodes.values()} - {None}
            if len(blocks) == 1:
                metrics[phase]["block"] = blocks.pop()
        elif phase == "rand_read":
            metrics[phase] = random_reads(nodes)
        elif phase in META_PHASES:
            metrics[phase] = metadata_rates(nodes)
    return metrics


def read_node_results(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("node-*.json"))]


def write_from_folder(folder: Path, params: dict[str, Any]) -> Path:
    results = read_node_results(folder)
    # fio's reports, the job files that reproduce them with plain fio, the node results
    raw = sorted(p.name for pattern in ("fio-*.json", "fio-*.fio", "node-*.json")
                 for p in folder.glob(pattern))
    rec = new_record("storage", params=params, metrics=metrics_from(results),
                     cluster={"hosts": sorted(r["node"] for r in results)}, raw_logs=raw)
    return write_record(folder / "record.json", rec)
