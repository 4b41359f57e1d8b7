"""Every size of the preset families is in the catalog and reaches config show, the twin
and the executor: a g5.12xlarge queue has 4 GPUs everywhere (it had none before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from toolkit import catalog
from toolkit.cli import main
from toolkit.config.model import load_topology
from toolkit.local.plan import Ports, build_plan
from toolkit.local.render import render_gres_conf, render_slurm_conf
from toolkit.paths import preset_path
from toolkit.submit.executor import ClusterExecutor

FAMILY_SIZES = {
    "g5": ["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge",
           "48xlarge"],
    "g6": ["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge",
           "48xlarge"],
    "g6e": ["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge",
            "48xlarge"],
    "p4d": ["24xlarge"], "p4de": ["24xlarge"], "p5": ["4xlarge", "48xlarge"],
    "p5e": ["48xlarge"], "p5en": ["48xlarge"], "p6-b200": ["48xlarge"],
    "trn1": ["2xlarge", "32xlarge"], "trn1n": ["32xlarge"], "trn2": ["48xlarge"],
}
# (type, accelerators, vCPUs, host GiB, EFA interfaces, Gbps, $/h): DescribeInstanceTypes via
# Karpenter's generated reference [S4e, S4b] and its us-east-1 price file [S4a]
SAMPLES = [
    ("g5.xlarge", 1, 4, 16, 0, 2.5, 1.006),
    ("g5.12xlarge", 4, 48, 192, 1, 40, 5.672),
    ("g5.16xlarge", 1, 64, 256, 1, 25, 4.096),
    ("g6.48xlarge", 8, 192, 768, 1, 100, 13.3504),
    ("g6e.24xlarge", 4, 96, 768, 2, 200, 15.06559),
    ("p5.4xlarge", 1, 16, 256, 1, 100, 6.88),
    ("trn1.2xlarge", 1, 8, 32, 0, 3.125, 1.34375),
]


def test_every_size_of_the_preset_families_is_cataloged() -> None:
    missing = [f"{fam}.{size}" for fam, sizes in FAMILY_SIZES.items() for size in sizes
               if catalog.find(f"{fam}.{size}") is None]
    assert not missing


@pytest.mark.parametrize(("name", "acc", "vcpus", "mem", "efa", "gbps", "price"), SAMPLES)
def test_size_samples(name: str, acc: int, vcpus: int, mem: float, efa: int, gbps: float,
                      price: float) -> None:
    inst = catalog.get(name)
    assert inst.accelerator is not None and inst.accelerator.count == acc
    assert (inst.vcpus, inst.memory_gib, inst.efa_interfaces) == (vcpus, mem, efa)
    assert (inst.network_gbps, inst.price_usd_per_hour) == (gbps, price)
    assert inst.efa_supported == bool(efa)


def test_one_model_per_family() -> None:
    models = {fam: {catalog.get(f"{fam}.{s}").accelerator.model for s in sizes}  # type: ignore[union-attr]
              for fam, sizes in FAMILY_SIZES.items()}
    assert models["g5"] == {"A10G"} and models["g6"] == {"L4"} and models["g6e"] == {"L40S"}
    assert models["p5"] == {"H100"} and models["trn1"] == {"Trainium"}


@pytest.fixture
def g5_12xl_config(tmp_path: Path) -> Path:
    data = yaml.safe_load(preset_path("g5-dev").read_text())
    cr = data["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]
    cr["Name"], cr["InstanceType"] = "g512", "g5.12xlarge"
    path = tmp_path / "g5-12xl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_config_show_counts_g5_12xlarge_gpus(g5_12xl_config: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "--json", str(g5_12xl_config)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["accelerators"] == {"min": 0, "max": 8}  # MaxCount 2 x 4 A10G
    assert shown["price_usd_per_hour"]["max"] == pytest.approx(2 * 5.672)


def test_twin_renders_g5_12xlarge_with_four_gpus(g5_12xl_config: Path) -> None:
    plan = build_plan(load_topology(g5_12xl_config), Path("/var/lib/pctk/twin"),
                      Ports(6817, 6819, 3306, 6900), hostname="headnode", host=(2, 24000),
                      user="slurm")
    nodes = [n for n in plan.nodes if n.instance_type == "g5.12xlarge"]
    assert nodes and all(n.gpu_count == 4 and n.gres == "gpu:a10g:4" for n in nodes)
    gres = render_gres_conf(plan)
    assert f"NodeName={nodes[0].name} Name=gpu Type=a10g File=" in gres
    assert gres.count("nvidia[0-3]") == len(nodes)
    assert "Gres=gpu:a10g:4" in render_slurm_conf(plan)


def test_executor_offers_g5_12xlarge_gpus(g5_12xl_config: Path, tmp_path: Path) -> None:
    ex = ClusterExecutor(tmp_path / "jobs", cluster=g5_12xl_config, queue="dev", gpus_per_node=4)
    assert ex.gpus_available == 4 and ex.parameters["gpus_per_node"] == 4
    with pytest.raises(Exception, match="4 GPUs per node; 5 were asked for"):
        ClusterExecutor(tmp_path / "jobs", cluster=g5_12xl_config, queue="dev", gpus_per_node=5)
