"""Prometheus textfile-collector output: the latest result of each kind as gauges.

The exposition is written by ``prometheus_client``: each family becomes a ``Gauge`` in a
private ``CollectorRegistry`` (never the process-wide default one, so a long-running exporter
and this writer do not mix) and ``write_to_textfile`` writes it to a temporary name in the
same folder and renames it, so node_exporter's textfile collector never reads half a file
(it only reads names ending in ``.prom``; the temporary name ends in ``.prom.<pid>.<thread>``).
Units follow Prometheus conventions: base units (bytes, seconds, FLOP/s), ratios 0..1.
Status codes are Nagios style: 0 OK/PASS, 1 WARN, 2 FAIL, 3 UNKNOWN/SKIP.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest, write_to_textfile

from benchmarks.record import KINDS, check_created
from toolkit.errors import PctkError
from toolkit.results import metrics as m
from toolkit.results import verdicts
from toolkit.results.baseline import judge
from toolkit.results.store import ResultStore, group_key

VERDICT_CODE = {"PASS": 0, "WARN": 1, "FAIL": 2, "UNKNOWN": 3}
HEALTH_CODE = {"OK": 0, "WARN": 1, "FAIL": 2, "SKIP": 3, "UNKNOWN": 3}
GB = 1e9  # nccl-tests' GB/s are decimal gigabytes
STORAGE_FAMILIES = {  # storage record figure -> (family, help, scale to the base unit)
    "mb_per_s": ("pctk_storage_throughput_bytes_per_second",
                 "Shared file system throughput over all nodes (stonewall), by phase.", 1e6),
    "iops": ("pctk_storage_iops", "Random 4 KiB read operations per second, all nodes.", 1.0),
    "per_s": ("pctk_storage_metadata_ops_per_second",
              "Files created, stat'ed or removed per second over all nodes, by phase.", 1.0),
}
GIB = float(1 << 30)

# fsdp metric key -> (family, help, scale to base unit)
TRAINING_FAMILIES = {
    "tokens_per_s_per_gpu": ("pctk_fsdp_gpu_tokens_per_second",
                             "Training throughput per GPU, tokens per second.", 1.0),
    "tflops_per_gpu": ("pctk_fsdp_gpu_flops_per_second",
                       "Achieved model FLOP/s per GPU.", 1e12),
    "step_time_p50_s": ("pctk_fsdp_step_p50_seconds", "Median training step time.", 1.0),
    "step_time_p90_s": ("pctk_fsdp_step_p90_seconds", "90th percentile training step time.",
                        1.0),
    "peak_memory_gib": ("pctk_fsdp_peak_memory_bytes", "Peak GPU memory allocated.", GIB),
    "checkpoint_save_s": ("pctk_fsdp_checkpoint_save_seconds",
                          "Time to save a distributed checkpoint.", 1.0),
    "checkpoint_load_s": ("pctk_fsdp_checkpoint_load_seconds",
                          "Time to load a distributed checkpoint.", 1.0),
    "checkpoint_save_gbps": ("pctk_fsdp_checkpoint_save_bytes_per_second",
                             "Checkpoint save throughput.", GB),
    "checkpoint_load_gbps": ("pctk_fsdp_checkpoint_load_bytes_per_second",
                             "Checkpoint load throughput.", GB),
}


@dataclass
class Family:
    """One gauge family before it goes into a registry: name, help, (labels, value) samples."""

    name: str
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, labels: dict[str, str], value: float) -> None:
        self.samples.append((labels, value))


def registry_of(families: list[Family]) -> CollectorRegistry:
    """A private registry with one ``Gauge`` per family that has samples.

    A family's label names are the union over its samples (a sample without one of them
    gets an empty value, which Prometheus treats as the label being absent).
    """
    registry = CollectorRegistry(auto_describe=True)
    for family in sorted(families, key=lambda f: f.name):
        if not family.samples:
            continue
        names = sorted({k for labels, _ in family.samples for k in labels})
        gauge = Gauge(family.name, family.help, names, registry=registry)
        for labels, value in sorted(family.samples, key=lambda s: sorted(s[0].items())):
            (gauge.labels(**{k: labels.get(k, "") for k in names}) if names
             else gauge).set(value)
    return registry


def render(families: list[Family]) -> str:
    """The text exposition format (0.0.4) of the families, as node_exporter reads it."""
    return generate_latest(registry_of(families)).decode()


def _group_labels(record: dict[str, Any]) -> dict[str, str]:
    cluster, instance_type = group_key(record)
    return {"cluster": cluster or "unknown", "instance_type": instance_type or "unknown"}


def latest_per_workload(store: ResultStore, look: int = 50) -> list[dict[str, Any]]:
    """The newest fsdp record of each workload (pretrain, sft, rl) of each group, among the
    group's ``look`` newest runs: a fine-tuning run does not replace pre-training's gauges."""
    out = []
    for group in store.group_kinds("fsdp"):
        seen: dict[str, dict[str, Any]] = {}
        for index, record in enumerate(store.newest_first("fsdp", *group)):
            if index >= look:
                break
            seen.setdefault(m.workload(record), record)
        out += [seen[w] for w in sorted(seen)]
    return out


def collect(store: ResultStore, threshold: float) -> list[Family]:
    fams: dict[str, Family] = {}

    def family(name: str, help_text: str) -> Family:
        return fams.setdefault(name, Family(name, help_text))

    latest: list[dict[str, Any]] = []
    regressions = 0
    for kind in KINDS:  # every kind: a failed slow-node sweep or scaling study shows too
        for record in latest_per_workload(store) if kind == "fsdp" else store.latest(kind):
            latest.append(record)
            group = _group_labels(record)
            if (workload := m.workload(record)) != "pretrain":  # a series of its own
                group = {**group, "workload": workload}
            labels = {**group, "kind": kind}
            created = check_created(record["created"])
            family("pctk_result_timestamp_seconds",
                   "When the latest result of this kind was measured (Unix time)."
                   ).add(labels, created.timestamp())
            family("pctk_result_verdict_status",
                   "Verdict of the latest result: 0 PASS, 1 WARN, 2 FAIL, 3 UNKNOWN."
                   ).add(labels, VERDICT_CODE.get(record["verdict"]["status"], 3))
            judged = judge(store, record, threshold)
            manual = judged.basis == "manual baseline"
            if manual or judged.points:  # automatic: only where there was history to judge
                basis = "manual" if manual else "automatic"
                family("pctk_baseline_regressions",
                       "Figures of the latest result that regressed against the baseline "
                       "(manual where set, else the median of its recent passing runs)."
                       ).add({**labels, "reference": basis}, len(judged.regressions))
                regressions += len(judged.regressions)
            _add_kind_samples(record, labels, group, family)
    if latest:
        family("pctk_overall_verdict_status",
               "Worst verdict over the latest result of every kind and group, as `pctk "
               "report` says it: 0 PASS, 1 WARN, 2 FAIL, 3 UNKNOWN."
               ).add({}, VERDICT_CODE[verdicts.overall(latest, regressions)])
    return list(fams.values())


def _add_kind_samples(record: dict[str, Any], labels: dict[str, str], group: dict[str, str],
                      family: Any) -> None:
    nodes = (record.get("cluster") or {}).get("nodes")
    if isinstance(nodes, int) and record.get("kind") in ("nccl-tests", "collectives"):
        labels = {**labels, "nodes": str(nodes)}  # busbw depends on the node count
    for name, points in m.busbw_curves(record, comparable_only=True).items():
        for point in points:
            family("pctk_busbw_bytes_per_second",
                   "Collective bus bandwidth by message size (nccl-tests busbw)."
                   ).add({**labels, "collective": name, "size": str(point.size)},
                         point.busbw * GB)
    for name, value in m.avg_busbw(record, comparable_only=True).items():
        family("pctk_busbw_average_bytes_per_second",
               "Mean bus bandwidth over all message sizes of the sweep."
               ).add({**labels, "collective": name}, value * GB)
    scalars = m.training_scalars(record)
    if "mfu" in scalars:
        family("pctk_fsdp_mfu_ratio", "Model FLOPs utilisation, 0 to 1.").add(
            group, m.mfu_fraction(scalars["mfu"]))
    for key, (name, help_text, scale) in TRAINING_FAMILIES.items():
        if key in scalars:
            family(name, help_text).add(group, scalars[key] * scale)
    storage = m.storage_scalars(record)
    for phase, figure in m.STORAGE_FIGURES:
        if (figure_value := storage.get(f"{phase}_{figure}")) is not None:
            name, help_text, factor = STORAGE_FAMILIES[figure]
            family(name, help_text).add({**group, "phase": phase}, figure_value * factor)
    expected = (record.get("metrics") or {}).get("expected_mb_per_s")
    if record.get("kind") == "storage" and isinstance(expected, int | float):
        family("pctk_storage_expected_bytes_per_second",
               "Throughput the shared file system should give: the lower of its provisioned "
               "throughput and the clients' network ceiling.").add(group, expected * 1e6)
    if record.get("kind") == "inference":
        _add_inference_samples(record, group, family)
    if record.get("kind") == "serving":
        _add_serving_samples(record, group, family)
    for node, checks in m.health_matrix(record).items():
        for check, cell in checks.items():
            family("pctk_health_check_status",
                   "Health check status per node: 0 OK, 1 WARN, 2 FAIL, 3 SKIP/UNKNOWN."
                   ).add({**group, "node": node, "check": check}, HEALTH_CODE[cell.status])


def _add_inference_samples(record: dict[str, Any], group: dict[str, str], family: Any) -> None:
    """Decode tokens/s, TPOT and roofline fraction per batch, TTFT per prompt length, and the
    cost per million output tokens of the latest inference run."""
    sc = m.inference_scalars(record)
    for batch, value, _ in m.inference_decode_curve(record):
        labels = {**group, "batch": str(batch)}
        family("pctk_inference_decode_tokens_per_second",
               "Decode tokens per second, all sequences of the batch together.").add(
            labels, value)
        if (tpot := sc.get(f"decode_b{batch}_tpot_s")) is not None:
            family("pctk_inference_tpot_seconds", "Median time per output token.").add(
                labels, tpot)
        if (fraction := sc.get(f"decode_b{batch}_roofline")) is not None:
            family("pctk_inference_decode_roofline_ratio",
                   "Decode tokens/s over the memory-bandwidth roofline, 0 to 1.").add(
                labels, fraction)
    for key, value in sc.items():
        if key.startswith("ttft_"):
            family("pctk_inference_ttft_seconds",
                   "Time to first token (prefill of one prompt).").add(
                {**group, "prompt_len": key[5:-2]}, value)
    if (cost := sc.get("test_time_usd_per_million_output_tokens")) is not None:
        family("pctk_inference_usd_per_million_output_tokens",
               "On-demand cost of a million output tokens in the test-time compute run."
               ).add(group, cost)


SERVING_LATENCY_FAMILIES = {
    "ttft_s": ("pctk_serving_ttft_seconds", "Time to first token of a served request."),
    "tpot_s": ("pctk_serving_tpot_seconds", "Time per output token after the first."),
    "itl_s": ("pctk_serving_itl_seconds", "Inter-token latency between streamed chunks."),
    "e2e_s": ("pctk_serving_request_seconds", "End-to-end latency of a served request."),
}
SERVING_RATE_FAMILIES = {
    "requests_per_s": ("pctk_serving_requests_per_second", "Completed requests per second."),
    "output_tokens_per_s": ("pctk_serving_output_tokens_per_second",
                            "Output tokens per second, all requests together."),
    "goodput_requests_per_s": ("pctk_serving_goodput_requests_per_second",
                               "Requests per second that met the TTFT and TPOT SLO."),
}


def _add_serving_samples(record: dict[str, Any], group: dict[str, str], family: Any) -> None:
    """Latency quantiles and rates per concurrency of the latest serving run."""
    for level in m.serving_levels(record):
        labels = {**group, "concurrency": str(level["concurrency"])}
        for key, (name, help_text) in SERVING_LATENCY_FAMILIES.items():
            for q in m.SERVING_QUANTILES:
                if (value := level.get(f"{key}_{q}")) is not None:
                    quantile = "1" if q == "max" else f"0.{q[1:]}"  # p50 -> 0.50, max -> 1
                    family(name, help_text).add({**labels, "quantile": quantile}, value)
        for key, (name, help_text) in SERVING_RATE_FAMILIES.items():
            if (value := level.get(key)) is not None:
                family(name, help_text).add(labels, value)


def write_textfile(store: ResultStore, out: Path, threshold: float) -> tuple[Path, int]:
    """Write the exposition file atomically (mode 0644); returns the path and the number of
    samples."""
    families = collect(store, threshold)
    write_registry(out, registry_of(families))
    return out, sum(len(f.samples) for f in families)


def check_textfile_path(out: Path) -> None:
    """Refuse a folder before any work is done (the rename would fail after it)."""
    if out.is_dir():
        raise PctkError(f"{out} is a folder", f"give a file path, e.g. {out / 'pctk.prom'}")


def write_registry(out: Path, registry: CollectorRegistry) -> None:
    """``write_to_textfile`` (a temporary file beside ``out``, then a rename), mode 0644 as
    node_exporter often runs as its own user; a folder or unwritable path is one line."""
    check_textfile_path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(str(out), registry)
        os.chmod(out, 0o644)
    except OSError as exc:
        raise PctkError(f"cannot write {out}: {exc.strerror or exc}") from None
