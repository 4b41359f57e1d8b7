"""Read the kind-specific ``metrics`` of result records into plain series.

The node-side writers own their layouts; these readers read exactly what the writers write
(``metrics.collectives`` as a list of blocks for nccl-tests and collectives records) and
skip what they cannot read rather than fail a whole report on one odd record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

BUSBW_KINDS = ("nccl-tests", "collectives")
HEALTH_STATUSES = ("OK", "WARN", "FAIL", "SKIP")
# Higher is better for both; the tuple is (metric key, label for people).
TRAINING_METRICS = (("tokens_per_s_per_gpu", "tokens/s per GPU"), ("mfu", "MFU"))
# storage records (benchmarks/storage): (phase, figure) pairs, all higher-is-better
STORAGE_FIGURES = (("seq_write", "mb_per_s"), ("seq_read", "mb_per_s"),
                   ("seq_write_shared", "mb_per_s"), ("seq_read_shared", "mb_per_s"),
                   ("ckpt_write", "mb_per_s"), ("ckpt_read", "mb_per_s"),
                   ("rand_read", "iops"), ("meta_create", "per_s"), ("meta_stat", "per_s"),
                   ("meta_remove", "per_s"))


@dataclass(frozen=True)
class BusbwPoint:
    size: int
    busbw: float  # GB/s (1e9 bytes/s), as nccl-tests prints it


# Larger magnitudes are no measurement (16 GiB is 1.7e10 bytes); refusing them keeps scaled
# values finite and charts drawable.
MAX_MAGNITUDE = 1e18


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float (stored before validation)
        return None
    return number if math.isfinite(number) and abs(number) <= MAX_MAGNITUDE else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _row_busbw(row: dict[str, Any]) -> float | None:
    """Out-of-place busbw (what nccl-tests' summaries quote), else in-place."""
    for placement in ("out_of_place", "in_place"):
        part = row.get(placement)
        if isinstance(part, dict) and (value := _number(part.get("busbw_gbps"))) is not None:
            return value
    return None


def collective_sections(metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{collective: block}`` from ``metrics["collectives"]``, the list of blocks that both
    writers produce (toolkit.bench.comm's ``CollectiveRun.to_block`` and benchmarks.collectives).

    A second block of the same collective is named ``all_reduce [half]`` by its dtype, or
    ``all_reduce #2`` when the dtype does not tell them apart.
    """
    blocks = [(str(b.get("collective") or "unknown"), b)
              for b in _list(metrics.get("collectives")) if isinstance(b, dict)]
    sections: dict[str, dict[str, Any]] = {}
    for name, block in blocks:
        key = name
        if key in sections:
            key = f"{name} [{block.get('dtype')}]" if block.get("dtype") else key
            index = 2
            while key in sections:
                key, index = f"{name} #{index}", index + 1
        sections[key] = block
    return sections


def is_emulated(block: dict[str, Any]) -> bool:
    """A torch sweep that stood in for a missing collective: its bandwidth is not comparable."""
    return str(block.get("implementation") or "").upper().startswith("EMULATED")


def emulated_collectives(record: dict[str, Any]) -> set[str]:
    return {name for name, block in collective_sections(record.get("metrics") or {}).items()
            if is_emulated(block)}


def busbw_curves(record: dict[str, Any], *, comparable_only: bool = False
                 ) -> dict[str, list[BusbwPoint]]:
    """``{collective: points sorted by size}``; empty for other kinds.

    ``comparable_only`` leaves out EMULATED blocks (for comparisons and alerting).
    """
    if record.get("kind") not in BUSBW_KINDS:
        return {}
    curves: dict[str, list[BusbwPoint]] = {}
    for name, section in collective_sections(record.get("metrics") or {}).items():
        if comparable_only and is_emulated(section):
            continue
        by_size: dict[int, float] = {}
        for row in _list(section.get("rows")):
            if not isinstance(row, dict):
                continue
            size, busbw = _number(row.get("size_bytes")), _row_busbw(row)
            if size is not None and busbw is not None:
                by_size[int(size)] = busbw
        if by_size:
            curves[name] = [BusbwPoint(s, by_size[s]) for s in sorted(by_size)]
    return curves


def nranks(record: dict[str, Any]) -> dict[str, int]:
    """``{collective: ranks}`` from each block's ``nranks``."""
    out = {}
    for name, section in collective_sections(record.get("metrics") or {}).items():
        value = section.get("nranks")
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value
    return out


def avg_busbw(record: dict[str, Any], *, comparable_only: bool = False) -> dict[str, float]:
    """``{collective: avg busbw GB/s}`` where the record reports one."""
    out: dict[str, float] = {}
    for name, section in collective_sections(record.get("metrics") or {}).items():
        if comparable_only and is_emulated(section):
            continue
        if (value := _number(section.get("avg_busbw_gbps"))) is not None:
            out[name] = value
    return out


def training_scalars(record: dict[str, Any]) -> dict[str, float]:
    """Numeric top-level fsdp metrics plus ``checkpoint_<key>`` for checkpoint figures."""
    if record.get("kind") != "fsdp":
        return {}
    metrics = record.get("metrics") or {}
    out = {k: v for k, raw in metrics.items() if (v := _number(raw)) is not None}
    checkpoint = metrics.get("checkpoint")
    if isinstance(checkpoint, dict):
        for key, raw in checkpoint.items():
            if (value := _number(raw)) is not None:
                out[f"checkpoint_{key}"] = value
    out.update(_checkpoint_timings(metrics))
    out.update(workload_scalars(record))
    return out


POST_TRAINING = ("sft", "rl")


def workload(record: dict[str, Any]) -> str:
    """pretrain, sft or rl (``params.workload``; records from before it are pre-training)."""
    value = (record.get("params") or {}).get("workload")
    return value if isinstance(value, str) and value else "pretrain"


def workload_scalars(record: dict[str, Any]) -> dict[str, float]:
    """``sft_<key>`` / ``rl_<key>`` numbers of a post-training record's ``metrics.<workload>``
    (``rl_phase_<phase>_s`` and ``rl_fraction_<phase>`` from the phase split)."""
    name = workload(record)
    section = (record.get("metrics") or {}).get(name)
    if name not in POST_TRAINING or not isinstance(section, dict):
        return {}
    out = {f"{name}_{k}": v for k, raw in section.items() if (v := _number(raw)) is not None}
    for key, prefix in (("phase_mean_s", "phase_"), ("phase_fraction", "fraction_")):
        part = section.get(key)
        if isinstance(part, dict):
            for phase, raw in part.items():
                if (value := _number(raw)) is not None:
                    suffix = "_s" if prefix == "phase_" else ""
                    out[f"{name}_{prefix}{phase}{suffix}"] = value
    return out


def rl_iterations(record: dict[str, Any]) -> list[tuple[int, dict[str, float]]]:
    """(iteration, {phase: seconds}) of an rl record, in order."""
    section = (record.get("metrics") or {}).get("rl")
    if workload(record) != "rl" or not isinstance(section, dict):
        return []
    out = []
    for item in _list(section.get("iterations")):
        if not isinstance(item, dict) or (step := _number(item.get("step"))) is None:
            continue
        phases = {k.removesuffix("_s"): v for k, raw in item.items()
                  if k.endswith("_s") and (v := _number(raw)) is not None}
        out.append((int(step), phases))
    return out


def _checkpoint_timings(metrics: dict[str, Any]) -> dict[str, float]:
    """benchmarks.fsdp.train's layout: ``checkpoint_saves`` (a list, averaged here) and
    ``checkpoint_load``, each ``{"step", "seconds", "bytes", "gb_per_s"}``."""
    out: dict[str, float] = {}
    saves = [s for s in _list(metrics.get("checkpoint_saves")) if isinstance(s, dict)]
    load = metrics.get("checkpoint_load")
    for prefix, timings in (("save", saves), ("load", [load] if isinstance(load, dict) else [])):
        for key, suffix in (("seconds", "s"), ("gb_per_s", "gbps")):
            values = [v for t in timings if (v := _number(t.get(key))) is not None]
            if values:
                out[f"checkpoint_{prefix}_{suffix}"] = sum(values) / len(values)
    return out


def inference_scalars(record: dict[str, Any]) -> dict[str, float]:
    """An inference record's figures by name: ``decode_b<batch>_tokens_per_s``,
    ``decode_b<batch>_tpot_s``, ``prefill_<len>_tokens_per_s``, ``ttft_<len>_s``, the
    roofline fraction ``decode_b<batch>_roofline`` where judged, and
    ``usd_per_million_output_tokens`` of a test-time compute run."""
    if record.get("kind") != "inference":
        return {}
    metrics = record.get("metrics") or {}
    out: dict[str, float] = {}
    for row in _list(metrics.get("decode")):
        if isinstance(row, dict) and isinstance(batch := row.get("batch"), int):
            for key, name in (("tokens_per_s", "tokens_per_s"), ("tpot_s", "tpot_s")):
                if (value := _number(row.get(key))) is not None:
                    out[f"decode_b{batch}_{name}"] = value
    for row in _list(metrics.get("prefill")):
        if isinstance(row, dict) and isinstance(length := row.get("prompt_len"), int):
            if (value := _number(row.get("tokens_per_s"))) is not None:
                out[f"prefill_{length}_tokens_per_s"] = value
            if (value := _number(row.get("ttft_s"))) is not None:
                out[f"ttft_{length}_s"] = value
    roof = metrics.get("roofline")
    if isinstance(roof, dict) and roof.get("judged"):
        for row in _list(roof.get("decode")):
            if isinstance(row, dict) and (value := _number(row.get("fraction"))) is not None:
                out[f"decode_b{row.get('batch')}_roofline"] = value
    test_time = metrics.get("test_time")
    if isinstance(test_time, dict):
        for key in ("usd_per_million_output_tokens", "tokens_per_s"):
            if (value := _number(test_time.get(key))) is not None:
                out[f"test_time_{key}"] = value
    return out


def inference_decode_curve(record: dict[str, Any]) -> list[tuple[int, float, float | None]]:
    """(batch, measured aggregate tokens/s, roofline bound or None) per decode batch size."""
    metrics = record.get("metrics") or {}
    roof = metrics.get("roofline") if isinstance(metrics.get("roofline"), dict) else {}
    bounds = {r.get("batch"): _number(r.get("bound_tokens_per_s"))
              for r in _list((roof or {}).get("decode")) if isinstance(r, dict)}
    out = []
    for row in _list(metrics.get("decode")):
        if isinstance(row, dict) and isinstance(batch := row.get("batch"), int) and (
                value := _number(row.get("tokens_per_s"))) is not None:
            out.append((batch, value, bounds.get(batch)))
    return sorted(out)


SERVING_RATES = ("requests_per_s", "output_tokens_per_s", "goodput_requests_per_s")
SERVING_LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
SERVING_QUANTILES = ("p50", "p90", "p99", "max")  # max: where too few requests for a p99


def serving_levels(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A serving record's levels, sorted by concurrency, as plain numbers: ``concurrency``,
    the rates (``requests_per_s``...) and ``<latency>_<quantile>`` (``ttft_s_p99``...);
    a figure that is missing or not a finite number is left out."""
    if record.get("kind") != "serving":
        return []
    out = []
    for row in _list((record.get("metrics") or {}).get("levels")):
        if not isinstance(row, dict) or not isinstance(c := row.get("concurrency"), int) \
                or isinstance(c, bool):
            continue
        level: dict[str, Any] = {"concurrency": c}
        for key in SERVING_RATES:
            if (value := _number(row.get(key))) is not None:
                level[key] = value
        for key in SERVING_LATENCIES:
            spread = row.get(key)
            if not isinstance(spread, dict):
                continue
            for q in SERVING_QUANTILES:
                if (value := _number(spread.get(q))) is not None:
                    level[f"{key}_{q}"] = value
        out.append(level)
    return sorted(out, key=lambda lv: lv["concurrency"])


def serving_scalars(record: dict[str, Any]) -> dict[str, float]:
    """``c<concurrency>_<figure>`` for each level of a serving record (``c4_ttft_s_p99``,
    ``c4_output_tokens_per_s``...)."""
    return {f"c{lv['concurrency']}_{k}": v for lv in serving_levels(record)
            for k, v in lv.items() if k != "concurrency"}


def storage_scalars(record: dict[str, Any]) -> dict[str, float]:
    """``<phase>_<figure>`` (``seq_read_mb_per_s``, ``rand_read_iops``...) of a storage
    record's aggregate (stonewall) figures."""
    if record.get("kind") != "storage":
        return {}
    metrics = record.get("metrics") or {}
    out: dict[str, float] = {}
    for phase, figure in STORAGE_FIGURES:
        section = metrics.get(phase)
        if isinstance(section, dict) and (value := _number(section.get(figure))) is not None:
            out[f"{phase}_{figure}"] = value
    return out


def per_step_series(record: dict[str, Any], key: str) -> list[tuple[int, float]]:
    """(step, value) pairs for a per-step metric, where the record carries them.

    Accepts ``metrics["steps"] = [{"step": n, key: v, ...}]`` and a bare list under
    ``metrics[key + "_per_step"]``; steps count from 1 when not given.
    """
    metrics = record.get("metrics") or {}
    out: list[tuple[int, float]] = []
    steps = metrics.get("steps")
    if isinstance(steps, list):
        for index, item in enumerate(steps, start=1):
            if isinstance(item, dict) and (value := _number(item.get(key))) is not None:
                step = _number(item.get("step"))
                out.append((int(step) if step is not None else index, value))
    bare = metrics.get(f"{key}_per_step")
    if not out and isinstance(bare, list):
        out = [(i, v) for i, raw in enumerate(bare, start=1) if (v := _number(raw)) is not None]
    return out


def loss_curve(record: dict[str, Any]) -> list[tuple[int, float]]:
    """(step, loss) from ``losses`` ([step, loss] pairs) or ``loss`` (values or dicts)."""
    metrics = record.get("metrics") or {}
    loss = metrics.get("losses") if isinstance(metrics.get("losses"), list) else metrics.get("loss")
    if not isinstance(loss, list):
        return []
    out = []
    for index, item in enumerate(loss, start=1):
        if isinstance(item, list | tuple) and len(item) == 2:
            step, value = _number(item[0]), _number(item[1])
            if step is not None and value is not None:
                out.append((int(step), value))
        elif isinstance(item, dict):
            value, step = _number(item.get("loss")), _number(item.get("step"))
            if value is not None:
                out.append((int(step) if step is not None else index, value))
        elif (value := _number(item)) is not None:
            out.append((index, value))
    return out


@dataclass(frozen=True)
class HealthCell:
    status: str  # one of HEALTH_STATUSES, or "UNKNOWN"
    message: str
    value: Any
    expected: Any
    remedy: str


def health_matrix(record: dict[str, Any]) -> dict[str, dict[str, HealthCell]]:
    """``{node: {check: cell}}`` from a health record; empty for other kinds."""
    if record.get("kind") != "health":
        return {}
    nodes = (record.get("metrics") or {}).get("nodes")
    matrix: dict[str, dict[str, HealthCell]] = {}
    if not isinstance(nodes, dict):
        return matrix
    for node, checks in nodes.items():
        if not isinstance(checks, dict):
            continue
        row: dict[str, HealthCell] = {}
        for check, body in checks.items():
            body = body if isinstance(body, dict) else {"status": body}
            status = str(body.get("status") or "UNKNOWN").upper()
            row[str(check)] = HealthCell(
                status=status if status in HEALTH_STATUSES else "UNKNOWN",
                message=str(body.get("message") or ""),
                value=body.get("value"),
                expected=body.get("expected"),
                remedy=str(body.get("remedy") or ""),
            )
        matrix[str(node)] = row
    return matrix


def headline(record: dict[str, Any]) -> str:
    """One short line that says what a record measured, for tables."""
    kind = record.get("kind")
    if kind in BUSBW_KINDS:
        parts = []
        averages = avg_busbw(record)
        for name, points in busbw_curves(record).items():
            top = points[-1]
            avg = f", avg {averages[name]:.1f}" if name in averages else ""
            parts.append(f"{name} {top.busbw:.1f} GB/s @ {format_size(top.size)}{avg}")
        return "; ".join(parts) or "no busbw rows"
    if kind == "fsdp":
        scalars = training_scalars(record)
        parts = _workload_headline(record, scalars)
        if "tokens_per_s_per_gpu" in scalars:
            parts.append(f"{scalars['tokens_per_s_per_gpu']:,.0f} tok/s/GPU")
        if "mfu" in scalars:
            parts.append(f"MFU {format_ratio(scalars['mfu'])}")
        if "step_time_p50_s" in scalars:
            parts.append(f"step p50 {scalars['step_time_p50_s']:.3f}s")
        return ", ".join(parts) or "no training metrics"
    if kind == "inference":
        sc = inference_scalars(record)
        parts = [f"decode b{b} {tps:,.0f} tok/s" + (
                     f" ({sc[f'decode_b{b}_roofline']:.0%} of roofline)"
                     if f"decode_b{b}_roofline" in sc else "")
                 for b, tps, _ in inference_decode_curve(record)]
        ttft = sorted((int(k[5:-2]), v) for k, v in sc.items() if k.startswith("ttft_"))
        if ttft:
            parts.append(f"TTFT@{ttft[0][0]} {ttft[0][1] * 1e3:.2f} ms")
        if "test_time_usd_per_million_output_tokens" in sc:
            parts.append(f"${sc['test_time_usd_per_million_output_tokens']:,.2f}/M output tokens")
        return ", ".join(parts) or "no inference figures"
    if kind == "serving":
        parts = []
        for lv in serving_levels(record):
            part = f"c{lv['concurrency']}"
            if "output_tokens_per_s" in lv:
                part += f" {lv['output_tokens_per_s']:,.0f} tok/s"
            if "ttft_s_p99" in lv:
                part += f" TTFT p99 {lv['ttft_s_p99'] * 1e3:,.0f} ms"
            elif "ttft_s_max" in lv:  # too few requests for a p99: their slowest
                part += f" TTFT max {lv['ttft_s_max'] * 1e3:,.0f} ms"
            if "goodput_requests_per_s" in lv:
                part += f" goodput {lv['goodput_requests_per_s']:,.2f} req/s"
            parts.append(part)
        return ", ".join(parts) or "no serving figures"
    if kind == "storage":
        sc = storage_scalars(record)
        parts = [f"{label} {sc[key]:,.0f} MB/s" for key, label in (
            ("seq_write_mb_per_s", "write"), ("seq_read_mb_per_s", "read")) if key in sc]
        if "rand_read_iops" in sc:
            parts.append(f"{sc['rand_read_iops']:,.0f} IOPS")
        return ", ".join(parts) or "no storage figures"
    if kind == "health":
        matrix = health_matrix(record)
        counts: dict[str, int] = {}
        for row in matrix.values():
            for cell in row.values():
                counts[cell.status] = counts.get(cell.status, 0) + 1
        summary = " ".join(f"{s}={counts[s]}" for s in (*HEALTH_STATUSES, "UNKNOWN")
                           if s in counts)
        return f"{len(matrix)} nodes: {summary}" if matrix else "no checks"
    if kind == "slow-nodes":
        m = record.get("metrics") or {}
        median = m.get("median_gbps")
        blamed = m.get("blamed") or []
        fig = f"median pair {median:.3g} GB/s" if isinstance(median, int | float) else \
            "no figure"
        return f"{fig}; " + (f"blamed {', '.join(map(str, blamed))}" if blamed else
                             "no slow node")
    return ""


def _workload_headline(record: dict[str, Any], sc: dict[str, float]) -> list[str]:
    name = workload(record)
    if name == "sft":
        parts = ["sft"]
        if "sft_real_tokens_per_s_per_gpu" in sc:
            parts.append(f"{sc['sft_real_tokens_per_s_per_gpu']:,.0f} real tok/s/GPU")
        if "sft_real_mfu" in sc:
            parts.append(f"real-token MFU {format_ratio(sc['sft_real_mfu'])}")
        if "sft_padding_fraction_packed" in sc and "sft_padding_fraction_unpacked" in sc:
            parts.append(f"padding {sc['sft_padding_fraction_packed']:.0%} packed / "
                         f"{sc['sft_padding_fraction_unpacked']:.0%} unpacked")
        return parts
    if name == "rl":
        section = (record.get("metrics") or {}).get("rl") or {}
        bound = section.get("bound_by") if isinstance(section, dict) else None
        parts = ["rl"]
        if isinstance(bound, str) and f"rl_fraction_{bound}" in sc:
            parts.append(f"bound by {bound} ({sc[f'rl_fraction_{bound}']:.0%})")
        if "rl_generation_tokens_per_s_per_gpu" in sc:
            parts.append(f"generation {sc['rl_generation_tokens_per_s_per_gpu']:,.0f} "
                         "tok/s/GPU")
        learning = section.get("learning") if isinstance(section, dict) else None
        if isinstance(learning, dict) and isinstance(learning.get("moved"), bool):
            first, last = _number(learning.get("first")), _number(learning.get("last"))
            if first is not None and last is not None:
                parts.append(f"reward {first:.2f} -> {last:.2f}"
                             + ("" if learning["moved"] else " (did not rise)"))
        return parts
    return []


def mfu_fraction(value: float) -> float:
    """MFU as a fraction; writers that report percent (34.0) are scaled down."""
    return value / 100.0 if value > 1.5 else value


def format_ratio(value: float) -> str:
    return f"{mfu_fraction(value) * 100:.1f}%"


def format_size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            text = f"{size / scale:.1f}".rstrip("0").rstrip(".")
            return f"{text} {unit}"
    return f"{size} B"
