"""`pctk catalog refresh` against DescribeInstanceTypes' documented response shape (botocore's
Stubber validates every request and response against the EC2 service model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from toolkit import catalog
from toolkit.catalog_cli import refresh
from toolkit.cli import main
from toolkit.config.lints import run_lints


def _type(name: str, vcpus: int, mib: int, gbps: float, efa: int = 0,
          gpus: list[dict[str, Any]] | None = None, arch: str = "x86_64") -> dict[str, Any]:
    info: dict[str, Any] = {
        "InstanceType": name,
        "CurrentGeneration": True,
        "ProcessorInfo": {"SupportedArchitectures": [arch]},
        "VCpuInfo": {"DefaultVCpus": vcpus},
        "MemoryInfo": {"SizeInMiB": mib},
        "NetworkInfo": {
            "NetworkPerformance": f"Up to {gbps * 2:g} Gigabit",
            "MaximumNetworkCards": 1,
            "NetworkCards": [{"NetworkCardIndex": 0, "NetworkPerformance": "x",
                              "MaximumNetworkInterfaces": 8,
                              "BaselineBandwidthInGbps": gbps, "PeakBandwidthInGbps": gbps * 2}],
            "EfaSupported": bool(efa),
        },
    }
    if efa:
        info["NetworkInfo"]["EfaInfo"] = {"MaximumEfaInterfaces": efa}
    if gpus:
        info["GpuInfo"] = {"Gpus": gpus, "TotalGpuMemoryInMiB": sum(
            g["Count"] * g["MemoryInfo"]["SizeInMiB"] for g in gpus)}
    return info


PAGE_1 = {"InstanceTypes": [
    _type("c8i.4xlarge", 16, 32768, 6.25),
    _type("c5.2xlarge", 8, 16384, 2.5),  # in the bundled catalog: its sourced entry wins
], "NextToken": "page-2"}
PAGE_2 = {"InstanceTypes": [
    _type("c8i.48xlarge", 192, 393216, 100.0, efa=1),
    _type("p5.24xlarge", 96, 1048576, 1600.0, efa=16, gpus=[{
        "Name": "H100", "Manufacturer": "NVIDIA", "Count": 4,
        "MemoryInfo": {"SizeInMiB": 81920}}]),
    _type("g9.xlarge", 4, 16384, 5.0, gpus=[{
        "Name": "Z900", "Manufacturer": "NVIDIA", "Count": 1,
        "MemoryInfo": {"SizeInMiB": 40000}}]),
]}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PCTK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_refresh_stores_what_the_bundled_catalog_lacks(home: Path) -> None:
    assert catalog.find("c8i.4xlarge") is None
    client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="AKIDEXAMPLE",
                          aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("describe_instance_types", PAGE_1, {})
        stub.add_response("describe_instance_types", PAGE_2, {"NextToken": "page-2"})
        result = refresh(client, "us-east-1")
        stub.assert_no_pending_responses()
    assert (result["read"], result["stored"]) == (5, 3)
    assert result["skipped"] == ["g9.xlarge: GPU Z900 is not a model the catalog knows"]
    stored = json.loads((home / "catalog" / "instance-types.json").read_text())
    assert stored["region"] == "us-east-1" and "c5.2xlarge" not in stored["instance_types"]

    c8i = catalog.get("c8i.4xlarge")
    assert (c8i.vcpus, c8i.memory_gib, c8i.network_gbps, c8i.efa_supported) == (16, 32, 6.25,
                                                                                False)
    assert c8i.price_usd_per_hour is None and "price_usd_per_hour" in c8i.unconfirmed
    assert c8i.sources["vcpus"][0].startswith("EC2 DescribeInstanceTypes, us-east-1, read ")
    big = catalog.get("c8i.48xlarge")
    assert (big.efa_supported, big.efa_interfaces) == (True, 1)
    p5 = catalog.get("p5.24xlarge")
    assert p5.accelerator is not None and (p5.gpus, p5.accelerator.gres_type) == (4, "h100")
    assert catalog.get("c5.2xlarge").price_usd_per_hour == 0.34  # bundled entry unchanged


def test_a_refreshed_type_is_no_longer_facts_unknown(home: Path) -> None:
    config = {"HeadNode": {"InstanceType": "c8i.4xlarge"}}
    assert [f.code for f in run_lints(config)].count("unknown-instance-type") == 1
    client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="AKIDEXAMPLE",
                          aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("describe_instance_types", {"InstanceTypes": PAGE_1["InstanceTypes"]},
                          {"InstanceTypes": ["c8i.4xlarge", "c5.2xlarge"]})
        refresh(client, "us-east-1", ["c8i.4xlarge", "c5.2xlarge"])
    assert [f.code for f in run_lints(config)].count("unknown-instance-type") == 0


def test_refresh_without_credentials_is_one_line(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main(["catalog", "refresh"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "no AWS credentials" in line
    assert not (home / "catalog").exists()


def test_show_names_each_figures_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "m7i.2xlarge", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["vcpus"], facts["memory_gib"], facts["price_usd_per_hour"]) == (8, 32, 0.4032)
    assert facts["sources"]["price_usd_per_hour"] == ["S4a"]


def test_show_gives_each_figure_its_value_beside_its_source(
        capsys: pytest.CaptureFixture[str]) -> None:
    srcs = catalog.sources()
    acc = catalog.get("p4de.24xlarge").accelerator
    assert acc is not None
    assert main(["catalog", "show", "p4de.24xlarge"]) == 0
    lines = capsys.readouterr().out.splitlines()

    def value_and_source(figure: str) -> tuple[str, str]:
        (at,) = [i for i, line in enumerate(lines) if line.startswith(f"{figure}: ")]
        assert lines[at + 1].startswith("  source: "), lines[at:at + 2]
        return lines[at].split(": ", 1)[1], lines[at + 1].split(": ", 1)[1]

    peak, peak_source = value_and_source("accelerator.peak_bf16_tflops")
    assert peak == f"{acc.peak_bf16_tflops:g} TFLOP/s dense bf16 per GPU (2,496 per node)"
    assert peak_source == "; ".join(srcs[k] for k in ("S9", "S9b"))
    bandwidth, bandwidth_source = value_and_source("accelerator.mem_bw_tbps")
    assert bandwidth == "2.039 TB/s memory bandwidth per GPU (16.3 per node)"
    assert bandwidth_source == srcs["S9"]
    memory, _ = value_and_source("accelerator.memory_mib")
    assert memory == "81,920 MiB (80 GiB) per GPU"
    assert value_and_source("interconnect")[0].startswith("NVLink 3")
    assert not any(line.startswith("source of ") for line in lines)  # every source placed

    assert main(["catalog", "show", "p4de.24xlarge", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["figures"]
    assert shown["accelerator.peak_bf16_tflops"]["value"] == 312
    assert shown["accelerator.peak_bf16_tflops"]["sources"] == ["S9", "S9b"]
    assert shown["accelerator.mem_bw_tbps"] == {
        "value": 2.039, "shown": bandwidth, "sources": ["S9"], "unconfirmed": False}
