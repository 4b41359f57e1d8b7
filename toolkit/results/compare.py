"""Regression detection: a result against a baseline of the same kind.

- busbw (nccl-tests, collectives): per collective, the largest message sizes both runs
  measured; small messages are latency-bound and too noisy to judge bandwidth by.
- fsdp: tokens/s per GPU and MFU; where per-step figures exist, the first step that falls
  below the limit is named.
- health: a (node, check) that FAILs now and did not FAIL in the baseline.

A drop counts when it is larger than ``threshold`` (relative, default 5%).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.bands import REGRESSION as DEFAULT_THRESHOLD
from benchmarks.bands import is_drop, judged_sizes
from toolkit.results import metrics as m
from toolkit.results.store import group_key


@dataclass(frozen=True)
class Point:
    """One compared figure: where it is, both values, the relative change."""

    metric: str
    where: str
    baseline: float | str
    current: float | str
    change: float | None  # (current - baseline) / baseline; None for non-numeric
    regression: bool


@dataclass
class Comparison:
    kind: str
    cluster: str
    instance_type: str
    current_id: str
    baseline_id: str
    threshold: float
    points: list[Point] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    basis: str = "manual baseline"  # or how the automatic baseline was formed

    @property
    def regressions(self) -> list[Point]:
        return [p for p in self.points if p.regression]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["regressed"] = bool(self.regressions)
        return data


def _change(current: float, baseline: float) -> float | None:
    return (current - baseline) / baseline if baseline else None


def large_common_sizes(current: list[m.BusbwPoint], baseline: list[m.BusbwPoint]) -> list[int]:
    return judged_sizes({p.size for p in current} & {p.size for p in baseline})


def compare_busbw(current: dict[str, Any], baseline: dict[str, Any], threshold: float,
                  out: Comparison) -> None:
    cur_curves = m.busbw_curves(current, comparable_only=True)
    base_curves = m.busbw_curves(baseline, comparable_only=True)
    for name in sorted(m.emulated_collectives(current) | m.emulated_collectives(baseline)):
        out.notes.append(f"{name}: EMULATED in one of the runs, bandwidth not compared")
    for name in sorted(base_curves.keys() - cur_curves.keys()):
        out.notes.append(f"{name}: in the baseline, not measured now")
    for name in sorted(cur_curves.keys() & base_curves.keys()):
        cur = {p.size: p.busbw for p in cur_curves[name]}
        base = {p.size: p.busbw for p in base_curves[name]}
        sizes = large_common_sizes(cur_curves[name], base_curves[name])
        if not sizes:
            out.notes.append(f"{name}: no message size in common with the baseline")
        for size in sizes:
            change = _change(cur[size], base[size])
            out.points.append(Point(
                metric="busbw_GBps", where=f"{name} @ {m.format_size(size)} ({size} B)",
                baseline=base[size], current=cur[size], change=change,
                regression=is_drop(change, threshold),
            ))
    cur_ranks, base_ranks = m.nranks(current), m.nranks(baseline)
    for name in sorted(cur_ranks.keys() & base_ranks.keys()):
        if cur_ranks[name] != base_ranks[name]:
            out.notes.append(f"{name}: ranks differ, baseline {base_ranks[name]}, "
                             f"now {cur_ranks[name]}")


def _first_slow_step(record: dict[str, Any], key: str, limit: float) -> str:
    series = m.per_step_series(record, key)
    params = record.get("params") or {}
    warmup = params.get("timing_warmup_steps", params.get("warmup_steps"))
    if isinstance(warmup, int):
        series = [(step, v) for step, v in series if step > warmup]
    if key == "mfu":
        series = [(step, m.mfu_fraction(v)) for step, v in series]
    slow = [step for step, value in series if value < limit]
    if not slow:
        return "run summary"
    return f"from step {slow[0]} ({len(slow)} of {len(series)} measured steps below)"


def compare_training(current: dict[str, Any], baseline: dict[str, Any], threshold: float,
                     out: Comparison) -> None:
    cur, base = m.training_scalars(current), m.training_scalars(baseline)
    for key, label in m.TRAINING_METRICS:
        if key not in cur or key not in base:
            if key in base:
                out.notes.append(f"{label}: in the baseline, not reported now")
            continue
        cur_value, base_value = cur[key], base[key]
        if key == "mfu":
            cur_value, base_value = m.mfu_fraction(cur_value), m.mfu_fraction(base_value)
        change = _change(cur_value, base_value)
        regression = change is not None and change < -threshold
        where = (_first_slow_step(current, key, base_value * (1 - threshold))
                 if regression else "run summary")
        out.points.append(Point(key, where, base_value, cur_value, change, regression))


def compare_health(current: dict[str, Any], baseline: dict[str, Any], out: Comparison) -> None:
    cur, base = m.health_matrix(current), m.health_matrix(baseline)
    for node, checks in sorted(cur.items()):
        for check, cell in sorted(checks.items()):
            before = base.get(node, {}).get(check)
            before_status = before.status if before else "absent"
            if cell.status == "FAIL" or before_status == "FAIL":
                out.points.append(Point(
                    metric="health", where=f"{node} {check}", baseline=before_status,
                    current=cell.status, change=None,
                    regression=cell.status == "FAIL" and before_status != "FAIL",
                ))


def compare_storage(current: dict[str, Any], baseline: dict[str, Any], threshold: float,
                    out: Comparison) -> None:
    cur, base = m.storage_scalars(current), m.storage_scalars(baseline)
    for key in sorted(base):
        if key not in cur:
            out.notes.append(f"{key}: in the baseline, not measured now")
            continue
        change = _change(cur[key], base[key])
        out.points.append(Point(key, "all nodes (stonewall)", base[key], cur[key], change,
                                change is not None and change < -threshold))


def compare_inference(current: dict[str, Any], baseline: dict[str, Any], threshold: float,
                      out: Comparison) -> None:
    """Decode tokens/s per batch and prefill tokens/s per prompt length: a drop regresses."""
    cur, base = m.inference_scalars(current), m.inference_scalars(baseline)
    for key in sorted(k for k in base if k.endswith("_tokens_per_s")
                      and k.startswith(("decode_", "prefill_"))):
        phase, where = key.split("_")[:2]
        where = f"batch {where[1:]}" if phase == "decode" else f"prompt {where}"
        if key not in cur:
            out.notes.append(f"{phase} {where}: in the baseline, not measured now")
            continue
        change = _change(cur[key], base[key])
        out.points.append(Point(f"{phase}_tokens_per_s", where, base[key], cur[key], change,
                                change is not None and change < -threshold))


def compare_serving(current: dict[str, Any], baseline: dict[str, Any], threshold: float,
                    out: Comparison) -> None:
    """Output tokens/s and goodput at each concurrency: a drop regresses."""
    cur, base = m.serving_scalars(current), m.serving_scalars(baseline)
    for key in sorted((k for k in base if k.endswith(("_output_tokens_per_s",
                                                       "_goodput_requests_per_s"))),
                      key=lambda k: (int(k[1:].split("_")[0]), k)):
        level, figure = key.split("_", 1)
        where = f"concurrency {level[1:]}"
        if key not in cur:
            out.notes.append(f"{figure} at {where}: in the baseline, not measured now")
            continue
        change = _change(cur[key], base[key])
        out.points.append(Point(figure, where, base[key], cur[key], change,
                                change is not None and change < -threshold))


def compare_records(current: dict[str, Any], baseline: dict[str, Any],
                    threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    if current["kind"] != baseline["kind"]:
        raise ValueError(f"cannot compare a {current['kind']} result with a {baseline['kind']}")
    cluster, instance_type = group_key(current)
    out = Comparison(current["kind"], cluster, instance_type, current["id"], baseline["id"],
                     threshold)
    if group_key(baseline) != (cluster, instance_type):
        base_cluster, base_type = group_key(baseline)
        out.notes.append(f"baseline is from {base_cluster or '?'} / {base_type or '?'}")
    if current["kind"] in m.BUSBW_KINDS:
        compare_busbw(current, baseline, threshold, out)
    elif current["kind"] == "fsdp" and m.workload(current) != m.workload(baseline):
        out.notes.append(f"baseline is a {m.workload(baseline)} run, this a "
                         f"{m.workload(current)} run: their throughputs are not comparable")
    elif current["kind"] == "fsdp":
        compare_training(current, baseline, threshold, out)
    elif current["kind"] == "health":
        compare_health(current, baseline, out)
    elif current["kind"] == "storage":
        compare_storage(current, baseline, threshold, out)
    elif current["kind"] == "inference":
        compare_inference(current, baseline, threshold, out)
    elif current["kind"] == "serving":
        compare_serving(current, baseline, threshold, out)
    if not out.points and not out.notes:
        out.notes.append("nothing comparable in these two records")
    return out
