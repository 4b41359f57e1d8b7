"""The accelerator table (benchmarks/accelerators.yaml): one home, read by the catalog and by
the benchmarks on a node, every figure sourced."""

from __future__ import annotations

import pytest
import yaml

from benchmarks import hardware
from toolkit import catalog


def test_every_figure_cites_sources_the_catalog_defines() -> None:
    defined = yaml.safe_load(catalog.DATA_FILE.read_text())["sources"]
    for m in hardware.models().values():
        figures = {k for k in ("peak_bf16_tflops", "peak_fp8_tflops", "peak_fp32_tflops",
                               "mem_bw_tbps", "memory_mib") if getattr(m, k) is not None}
        assert figures <= set(m.sources), (m.name, figures - set(m.sources))
        for field, keys in m.sources.items():
            assert keys and set(keys) <= set(defined), (m.name, field, keys)
        assert set(m.unconfirmed) <= figures, m.name


def test_the_catalogs_accelerators_are_the_tables_rows() -> None:
    seen = set()
    for inst in catalog.all_instances():
        acc = inst.accelerator
        if acc is None:
            continue
        row = hardware.models()[acc.model]
        seen.add(acc.model)
        assert (acc.peak_bf16_tflops, acc.peak_fp8_tflops, acc.mem_bw_tbps, acc.memory_mib,
                acc.gres_type) == (row.peak_bf16_tflops, row.peak_fp8_tflops, row.mem_bw_tbps,
                                   row.memory_mib, row.gres_type), inst.name
    assert {"H100", "H200", "A100-40GB", "B200", "Trainium2"} <= seen


@pytest.mark.parametrize(("device", "tbps"), [
    ("NVIDIA H100 80GB HBM3", 3.35), ("NVIDIA H200", 4.8), ("NVIDIA A100-SXM4-80GB", 2.039),
    ("NVIDIA L4", 0.3), ("NVIDIA H100 NVL", None), ("Tesla T4", None)])
def test_bandwidth_by_exact_device_name(device: str, tbps: float | None) -> None:
    assert hardware.mem_bw_tbps_for(device) == tbps


def test_an_fp8_peak_only_where_the_gpu_has_fp8_tensor_cores() -> None:
    assert hardware.peak_tflops_for("NVIDIA H100 80GB HBM3", "float8") == 1979.0
    assert hardware.peak_tflops_for("NVIDIA A100-SXM4-40GB", "float8") is None
    assert "benchmarks/accelerators.yaml" in hardware.source_of("NVIDIA H200", "float8")
