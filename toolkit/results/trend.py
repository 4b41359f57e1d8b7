"""Series over time: one figure per run for each (cluster, instance type, node count, metric).

The figures are the ones the verdicts and comparisons judge, read with
:mod:`toolkit.results.metrics`:

- busbw: per collective, the busbw at the largest message size the run measured (what
  toolkit.bench.comm's verdict judges); the size is part of the series, so a sweep with a different
  ``maxbytes`` starts a new series instead of mixing figures. EMULATED blocks are left out.
- fsdp: tokens/s per GPU and MFU (as a fraction); storage throughput as the checkpoint
  save / load GB/s where the run wrote or read checkpoints.
- storage (``pctk bench storage``): each phase's aggregate figure (MB/s, IOPS, files/s).
- health: the number of FAIL cells (node x check) in the run.
- inference: aggregate decode tokens/s per batch size; serving (``bench inference --mode
  serve``): output tokens/s and goodput (requests/s within the SLO) per concurrency.

Each point keeps the record's software versions, node list and instance type, so a change
point can be lined up with what changed around it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.record import check_created
from toolkit.results import metrics as m
from toolkit.results.store import group_key

# Software a change in performance is usually traced to (record["software"] keys).
# GB/s of the benchmark's checkpoint save and load (averaged over its saves).
STORAGE_METRICS = ("checkpoint_save_gbps", "checkpoint_load_gbps")
# the record kinds that have trend figures (record_figures)
TREND_KINDS = (*m.BUSBW_KINDS, "fsdp", "storage", "health", "scaling", "inference",
               "serving")
SOFTWARE_KEYS = ("nccl", "aws_ofi_nccl", "efa", "libfabric", "driver", "cuda_driver", "cuda",
                 "torch")


@dataclass(frozen=True)
class SeriesKey:
    cluster: str
    instance_type: str
    nodes: int | None
    kind: str
    metric: str  # busbw_GBps, tokens_per_s_per_gpu, mfu, health_fail_count
    where: str  # "all_reduce @ 16 GiB", "" for one figure per run

    def label(self) -> str:
        nodes = f"{self.nodes} nodes" if self.nodes else "? nodes"
        where = f" {self.where}" if self.where else ""
        return (f"{self.cluster or '?'} / {self.instance_type or '?'} / {nodes}: "
                f"{self.metric}{where}")

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster or None, "instance_type": self.instance_type or None,
                "nodes": self.nodes, "kind": self.kind, "metric": self.metric,
                "where": self.where or None}


@dataclass(frozen=True)
class TrendPoint:
    result_id: str
    created: str
    value: float
    status: str  # the record's verdict status
    context: dict[str, str]  # software versions, "hosts", "instance_type"


@dataclass
class Series:
    key: SeriesKey
    points: list[TrendPoint] = field(default_factory=list)  # oldest first

    @property
    def values(self) -> list[float]:
        return [p.value for p in self.points]


def run_order(record: dict[str, Any]) -> tuple[Any, str]:
    """When a record ran (parsed: writers spell ISO times differently), then its id."""
    return (check_created(record["created"]), record["id"])


def node_count(record: dict[str, Any]) -> int | None:
    cluster = record.get("cluster") or {}
    nodes = cluster.get("nodes")
    if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 0:
        return nodes
    hosts = cluster.get("hosts")
    return len(hosts) if isinstance(hosts, list) and hosts else None


def record_context(record: dict[str, Any]) -> dict[str, str]:
    """What a change in a figure is usually traced to, as printable strings."""
    software = record.get("software") or {}
    context = {k: str(software[k]) for k in SOFTWARE_KEYS if software.get(k) is not None}
    cluster = record.get("cluster") or {}
    hosts = cluster.get("hosts")
    if isinstance(hosts, list) and hosts:
        context["hosts"] = ",".join(sorted(str(h) for h in hosts))
    if cluster.get("instance_type"):
        context["instance_type"] = str(cluster["instance_type"])
    return context


def record_figures(record: dict[str, Any]) -> list[tuple[str, str, float]]:
    """``(metric, where, value)`` for each figure a trend follows in this record."""
    kind = record.get("kind")
    if kind in m.BUSBW_KINDS:
        return [("busbw_GBps", f"{name} @ {m.format_size(points[-1].size)}", points[-1].busbw)
                for name, points in m.busbw_curves(record, comparable_only=True).items()]
    if kind == "fsdp":
        scalars = m.training_scalars(record)
        out = []
        # a post-training workload is a series of its own (its tokens/s count other things)
        where = "" if m.workload(record) == "pretrain" else f"workload {m.workload(record)}"
        if "tokens_per_s_per_gpu" in scalars:
            out.append(("tokens_per_s_per_gpu", where, scalars["tokens_per_s_per_gpu"]))
        if "mfu" in scalars:
            out.append(("mfu", where, m.mfu_fraction(scalars["mfu"])))
        for key in STORAGE_METRICS:  # checkpoint writes and reads: the storage figures
            if key in scalars:
                out.append((key, "", scalars[key]))
        return out
    if kind == "storage":
        return [(key, "", value) for key, value in m.storage_scalars(record).items()]
    if kind == "scaling":  # efficiency at each size but the base (1.0 by definition)
        sizes = (record.get("metrics") or {}).get("sizes") or []
        return [("scaling_efficiency", f"{s['nodes']} nodes", float(s["efficiency"]))
                for s in sizes[1:] if isinstance(s.get("efficiency"), int | float)]
    if kind == "inference":  # aggregate decode tokens/s at each batch size
        return [("decode_tokens_per_s", f"batch {batch}", value)
                for batch, value, _ in m.inference_decode_curve(record)]
    if kind == "serving":  # output tokens/s and goodput at each concurrency
        return [(key, f"concurrency {lv['concurrency']}", lv[key])
                for lv in m.serving_levels(record)
                for key in ("output_tokens_per_s", "goodput_requests_per_s") if key in lv]
    if kind == "health":
        matrix = m.health_matrix(record)
        if not matrix:
            return []
        fails = sum(cell.status == "FAIL" for row in matrix.values() for cell in row.values())
        return [("health_fail_count", "", float(fails))]
    return []


def build_series(records: Iterable[dict[str, Any]]) -> list[Series]:
    """Series from records in any order; each series oldest first, series sorted by key.

    Only the figures are kept, so a generator of records is read in constant memory."""
    found: dict[SeriesKey, list[tuple[tuple[Any, str], TrendPoint]]] = {}
    for record in records:
        cluster, instance_type = group_key(record)
        nodes = node_count(record)
        figures = record_figures(record)
        if not figures:
            continue
        order, context = run_order(record), record_context(record)
        for metric, where, value in figures:
            key = SeriesKey(cluster, instance_type, nodes, record["kind"], metric, where)
            found.setdefault(key, []).append((order, TrendPoint(
                record["id"], record["created"], value, record["verdict"]["status"], context)))
    return [Series(key, [point for _, point in sorted(found[key], key=lambda item: item[0])])
            for key in sorted(found, key=_sort_key)]


def _sort_key(key: SeriesKey) -> tuple[str, str, int, str, str, str]:
    return (key.cluster, key.instance_type, key.nodes or 0, key.kind, key.metric, key.where)


def series_for(series: list[Series], record: dict[str, Any]) -> dict[tuple[str, str], Series]:
    """``{(metric, where): series}`` of the series ``record`` belongs to."""
    cluster, instance_type = group_key(record)
    nodes = node_count(record)
    return {(s.key.metric, s.key.where): s for s in series
            if (s.key.cluster, s.key.instance_type, s.key.nodes, s.key.kind)
            == (cluster, instance_type, nodes, record["kind"])}
