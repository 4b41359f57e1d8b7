"""Dense peak TFLOP/s per GPU, keyed by the exact name ``torch.cuda.get_device_name`` returns.

Exact names, not substrings: "NVIDIA H100 NVL" contains "H100" but peaks at 835, not the SXM
part's 989, and a GB200 is not a B200. A GPU not listed here gets no MFU unless the run is
given ``--peak-tflops``. Where the toolkit's instance catalog (toolkit/data/instances.yaml) has
the model, ``catalog_model`` names it and a test keeps the two bf16 figures equal.

bf16 is the dense tensor-core figure (datasheets print the 2:4-sparse one, twice as high).
fp32 is the plain FP32 figure, without TF32: what an ``--fp32`` run gets, since torch leaves
TF32 matmuls off unless asked. Sources: NVIDIA datasheets for H100 (SXM, PCIe, NVL), H200
(SXM, NVL), A100, L40S, HGX B200 (per-GPU = 8-GPU figure / 8) and GB200 NVL72 (/ 72); A10G
has no NVIDIA datasheet (70 is the figure most MFU tools use; the catalog marks it unconfirmed).

fp8 is the dense FP8 tensor-core figure (the datasheets' sparse figure halved), what a
``--fp8`` run divides by; None where the GPU has no FP8 tensor cores (A100, A10G: sm80/86).
Same datasheets: H100 SXM 3,958 sparse, PCIe 3,026, NVL 3,341; H200 SXM 3,958, NVL 3,341;
L40S 1,466; HGX B200 72 PF sparse per 8; GB200 NVL72 720 PF sparse per 72.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    bf16: float
    fp32: float | None
    catalog_model: str | None = None
    fp8: float | None = None


PEAKS: dict[str, Peak] = {
    "NVIDIA H100 80GB HBM3": Peak(989.0, 67.0, "H100", 1979.0),  # SXM5: 1,979 sparse bf16
    "NVIDIA H100 PCIe": Peak(756.0, 51.0, None, 1513.0),  # 1,513 sparse
    "NVIDIA H100 NVL": Peak(835.0, 60.0, None, 1670.5),  # 1,671 sparse
    "NVIDIA H200": Peak(989.0, 67.0, "H200", 1979.0),  # SXM: 1,979 sparse
    "NVIDIA H200 NVL": Peak(835.0, 60.0, None, 1670.5),  # 1,671 sparse
    "NVIDIA A100-SXM4-40GB": Peak(312.0, 19.5, "A100-40GB"),  # 624 sparse
    "NVIDIA A100-SXM4-80GB": Peak(312.0, 19.5, "A100-80GB"),
    "NVIDIA A100-PCIE-40GB": Peak(312.0, 19.5),
    "NVIDIA A100 80GB PCIe": Peak(312.0, 19.5),
    "NVIDIA B200": Peak(2250.0, 75.0, "B200", 4500.0),  # HGX B200: 36 PF sparse, 600 TF fp32 per 8
    "NVIDIA GB200": Peak(2500.0, 80.0, None, 5000.0),  # NVL72: 360 PF sparse, 5,760 TF fp32 per 72
    "NVIDIA L40S": Peak(362.05, 91.6, "L40S", 733.0),  # 733 sparse
    "NVIDIA A10G": Peak(70.0, None, "A10G"),
}


def peak_tflops_for(device_name: str, dtype: str = "bfloat16") -> float | None:
    """Dense peak for this exact device name and compute dtype, or None when unknown."""
    peak = PEAKS.get(device_name.strip())
    if peak is None:
        return None
    if dtype == "bfloat16":
        return peak.bf16
    if dtype == "float32":
        return peak.fp32
    if dtype == "float8":
        return peak.fp8
    raise ValueError(f"no peak table for dtype {dtype!r}; use bfloat16, float32 or float8")
