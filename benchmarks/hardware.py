"""The accelerator table (``benchmarks/accelerators.yaml``): peaks, memory and bandwidth.

The one home of accelerator facts. The instance catalog (:mod:`toolkit.catalog`) reads it for
the instance types' accelerators; a benchmark on a compute node reads it by the exact name
``torch.cuda.get_device_name`` returns, for the MFU and the roofline of a run given no
``--peak-tflops`` / ``--mem-bw-tbps``. Torch-free, so both sides import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

DATA_FILE = Path(__file__).resolve().parent / "accelerators.yaml"
# where the figures come from, for a record's peak_tflops_source
TABLE = "benchmarks/accelerators.yaml"

# compute dtype -> the table's peak field
_PEAK_FIELD = {"bfloat16": "peak_bf16_tflops", "float32": "peak_fp32_tflops",
               "float8": "peak_fp8_tflops"}


@dataclass(frozen=True)
class Model:
    """One accelerator model's row. Figures the table does not state are None."""

    name: str  # "H100", "A100-40GB", ...
    kind: str  # "gpu" | "neuron"
    vendor: str
    peak_bf16_tflops: float
    peak_fp8_tflops: float | None
    peak_fp32_tflops: float | None
    mem_bw_tbps: float | None
    memory_mib: int | None  # as AWS publishes it; None for models no catalog instance has
    gres_type: str | None
    device_names: tuple[str, ...]
    sources: dict[str, list[str]]
    unconfirmed: tuple[str, ...]
    note: str | None

    def peak_tflops(self, dtype: str) -> float | None:
        if dtype not in _PEAK_FIELD:
            raise ValueError(f"no peak for dtype {dtype!r}; use bfloat16, float32 or float8")
        value: float | None = getattr(self, _PEAK_FIELD[dtype])
        return value


def _opt_float(row: dict[str, Any], key: str) -> float | None:
    return float(row[key]) if row.get(key) is not None else None


def _model(name: str, row: dict[str, Any]) -> Model:
    return Model(
        name=name, kind=str(row["kind"]), vendor=str(row["vendor"]),
        peak_bf16_tflops=float(row["peak_bf16_tflops"]),
        peak_fp8_tflops=_opt_float(row, "peak_fp8_tflops"),
        peak_fp32_tflops=_opt_float(row, "peak_fp32_tflops"),
        mem_bw_tbps=_opt_float(row, "mem_bw_tbps"),
        memory_mib=int(row["memory_mib"]) if row.get("memory_mib") is not None else None,
        gres_type=row.get("gres_type"),
        device_names=tuple(row.get("device_names") or ()),
        sources={k: list(v) for k, v in (row.get("sources") or {}).items()},
        unconfirmed=tuple(row.get("unconfirmed") or ()),
        note=row.get("note"),
    )


@cache
def models() -> dict[str, Model]:
    """Every model of the table, by its name."""
    with DATA_FILE.open(encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)["accelerators"]
    return {name: _model(name, row) for name, row in raw.items()}


@cache
def _by_device() -> dict[str, Model]:
    out: dict[str, Model] = {}
    for m in models().values():
        for device in m.device_names:
            if device in out:
                raise ValueError(f"{TABLE}: {device!r} is named by {out[device].name} and {m.name}")
            out[device] = m
    return out


def for_device(device_name: str) -> Model | None:
    """The model of this exact device name (``torch.cuda.get_device_name``), or None."""
    return _by_device().get(device_name.strip())


def peak_tflops_for(device_name: str, dtype: str = "bfloat16") -> float | None:
    """Dense peak for this exact device name and compute dtype, or None when unknown."""
    if dtype not in _PEAK_FIELD:
        raise ValueError(f"no peak for dtype {dtype!r}; use bfloat16, float32 or float8")
    m = for_device(device_name)
    return m.peak_tflops(dtype) if m is not None else None


def mem_bw_tbps_for(device_name: str) -> float | None:
    """Memory bandwidth (TB/s) of this exact device name, or None when unknown."""
    m = for_device(device_name)
    return m.mem_bw_tbps if m is not None else None


def source_of(device_name: str, dtype: str = "bfloat16") -> str:
    """How a record names the peak it divided by."""
    m = for_device(device_name)
    where = f"{m.name} {_PEAK_FIELD[dtype]}" if m is not None else "no row"
    return f"{TABLE}: {device_name.strip()} ({where})"
