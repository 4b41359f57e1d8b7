"""Node checks against the catalog for every GPU model: NVML memory totals (a healthy total
passes, a clearly short one fails), whole-model name matching, and the single-node NCCL
figure when NCCL's algorithm is not known.

NVML needs a GPU, so a stand-in ``pynvml`` module (below) hands the real
``check_gpu_memory`` the totals that nvidia-smi prints for healthy GPUs. Where each total
comes from (nvidia-smi "Memory-Usage" / memory.total, MiB):

- A10G 23,028 (g5; the A10 board shows the same): modal-labs/modal-client PR #2797 lists
  nvidia-smi totals per GPU; many g5 logs show "0MiB / 23028MiB". Older drivers (470) report
  22,731 on g5: bottlerocket-os/bottlerocket-core-kit PR #122.
- L4 23,034: modal-labs/modal-client PR #2797; speaches-ai/speaches PR #438.
- L40S 46,068: modal-labs/modal-client PR #2797; akash-network/provider-configs PR #95
  (taken on a live g6e.xlarge).
- A100-SXM4-40GB 40,960 and A100-SXM4-80GB 81,920: modal-labs/modal-client PR #2797.
- H100 80GB HBM3 81,559: modal-labs/modal-client PR #2797; NVIDIA/nccl issue #1264.
- H200 143,771: nvidia-smi tables in public repositories ("0MiB / 143771MiB"); no issue
  thread found to cite (unconfirmed).
- B200 183,359: NVIDIA/TensorRT-LLM issue #10278.

GDDR parts (A10G, L4, L40S) lose 1/16 of their memory to ECC ("On GPUs with GDDR memory with
ECC enabled the available DRAM is reduced by 6.25%", NVIDIA CUDA C++ Best Practices Guide):
24 GiB boards report ~23,030 MiB, 48 GiB boards ~46,070. AWS publishes the net figure
(22,888 / 45,776 MiB), which is what the check starts from.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from benchmarks.health.context import NodeContext, load_thresholds
from benchmarks.health.gpu_nvml import (
    check_gpu_memory,
    memory_total_short,
    model_matches,
    nvml_session,
)
from benchmarks.health.tools import Tools
from toolkit import catalog
from toolkit.health.expect import instance_expectations

MIB = 2**20
# model -> (an instance type with it, healthy NVML totals in MiB)
HEALTHY_NVML_MIB = {
    "A10G": ("g5.12xlarge", [23028, 22731]),
    "L4": ("g6.xlarge", [23034]),
    "L40S": ("g6e.48xlarge", [46068]),
    "A100-40GB": ("p4d.24xlarge", [40960]),
    "A100-80GB": ("p4de.24xlarge", [81920]),
    "H100": ("p5.48xlarge", [81559]),
    "H200": ("p5en.48xlarge", [143771]),
    "B200": ("p6-b200.48xlarge", [183359]),
}


class _StandInNvml(types.ModuleType):
    """Stand-in for pynvml: N GPUs that report ``total_mib`` each, nothing in use."""

    class NVMLError_NotSupported(Exception):
        pass

    def __init__(self, total_mib: int, gpus: int) -> None:
        super().__init__("pynvml")
        self.total, self.gpus = total_mib * MIB, gpus

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(total=self.total, used=0, free=self.total)


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int, int], None]]:
    def install(total_mib: int, gpus: int) -> None:
        monkeypatch.setitem(sys.modules, "pynvml", _StandInNvml(total_mib, gpus))
        nvml_session.cache_clear()

    nvml_session.cache_clear()
    yield install
    nvml_session.cache_clear()


def _check(instance_type: str, tmp_path: Path) -> tuple[str, str]:
    ctx = NodeContext(node="n1", instance_type=instance_type,
                      expect=instance_expectations(instance_type), thresholds=load_thresholds(),
                      mounts=[], tools=Tools([], "n1"), slurm_conf=str(tmp_path / "slurm.conf"))
    result = check_gpu_memory(ctx)
    return result.status, result.message


def test_table_covers_every_gpu_model_in_the_catalog() -> None:
    models = {i.accelerator.model for i in catalog.all_instances()
              if i.accelerator is not None and i.accelerator.kind == "gpu"}
    assert models == set(HEALTHY_NVML_MIB)
    for model, (itype, _) in HEALTHY_NVML_MIB.items():
        assert catalog.get(itype).accelerator.model == model  # type: ignore[union-attr]


@pytest.mark.parametrize("model", sorted(HEALTHY_NVML_MIB))
def test_healthy_total_passes_and_short_total_fails(model: str, nvml, tmp_path: Path) -> None:
    itype, healthy = HEALTHY_NVML_MIB[model]
    gpus = catalog.get(itype).gpus
    for total in healthy:
        nvml(total, gpus)
        status, message = _check(itype, tmp_path)
        assert status == "OK", f"{model} {total} MiB: {message}"
    published = catalog.get(itype).accelerator.memory_mib  # type: ignore[union-attr]
    nvml(int(published * 0.85), gpus)  # a lost memory stack or a wrong part
    status, message = _check(itype, tmp_path)
    assert status == "FAIL" and "MiB, expected about" in message


def test_nominal_gib_would_drain_healthy_gddr_nodes() -> None:
    """Why the check starts from AWS's MiB: 24 GiB x 0.95 is above a healthy A10G."""
    fraction = load_thresholds()["gpu_memory_min_total_fraction"]
    assert memory_total_short(23028 * MIB, 24 * 1024, fraction)
    assert memory_total_short(46068 * MIB, 48 * 1024, fraction)
    assert not memory_total_short(23028 * MIB, 22888, fraction)
    assert not memory_total_short(46068 * MIB, 45776, fraction)


def test_older_expectation_files_in_gib_still_work(nvml, tmp_path: Path) -> None:
    nvml(81559, 8)
    expect = {"gpu_count": 8, "gpu_model": "H100", "gpu_memory_gib": 80}
    ctx = NodeContext(node="n1", instance_type="p5.48xlarge", expect=expect,
                      thresholds=load_thresholds(), mounts=[], tools=Tools([], "n1"),
                      slurm_conf=str(tmp_path / "slurm.conf"))
    assert check_gpu_memory(ctx).status == "OK"


@pytest.mark.parametrize(("model", "nvml_name", "same"), [
    ("H100", "NVIDIA H100 80GB HBM3", True),
    ("H100", "NVIDIA H100 NVL", False),
    ("H100", "NVIDIA H100 PCIe", False),
    ("H200", "NVIDIA H200", True),
    ("H200", "NVIDIA H200 NVL", False),
    ("B200", "NVIDIA B200", True),
    ("B200", "NVIDIA GB200", False),
    ("A10G", "NVIDIA A10G", True),
    ("A10G", "NVIDIA A10", False),
    ("L4", "NVIDIA L4", True),
    ("L4", "NVIDIA L40S", False),
    ("A100-40GB", "NVIDIA A100-SXM4-40GB", True),
    ("A100-40GB", "A100-SXM4-40GB", True),  # drivers before R510 print no vendor prefix
    ("A100-80GB", "NVIDIA A100-SXM4-40GB", False),
])
def test_gpu_model_check_matches_whole_models(model: str, nvml_name: str, same: bool) -> None:
    assert model_matches(model, nvml_name) is same


def test_node_nccl_check_passes_a_healthy_ring_p5(nvml, tmp_path: Path) -> None:
    """A healthy p5 running Ring (366 GB/s) is not drained: the node check cannot know
    NCCL's algorithm, so it holds the run to the Ring figure (370), not NVLS's 480."""
    from benchmarks.health.perf import check_nccl

    nvml(81559, 8)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "all_reduce_perf"  # stand-in: nccl-tests needs GPUs
    stand_in.write_text(
        "#!/bin/sh\ncat <<'X'\n"
        "  2147483648  536870912  float  sum  -1  10270  209.1  366.0  0  10280  208.9  365.6  0\n"
        "  4294967296 1073741824  float  sum  -1  20540  209.1  366.0  0  20550  209.0  365.7  0\n"
        "# Avg bus bandwidth    : 365.8\nX\n")
    stand_in.chmod(0o755)
    ctx = NodeContext(node="n1", instance_type="p5.48xlarge",
                      expect=instance_expectations("p5.48xlarge"), thresholds=load_thresholds(),
                      mounts=[], tools=Tools([str(bin_dir)], "n1"),
                      slurm_conf=str(tmp_path / "slurm.conf"))
    result = check_nccl(ctx)
    assert result.status == "OK", result.message
    assert "of 370" in result.message and "Ring figure" in result.message
