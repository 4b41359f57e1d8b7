"""`pctk plan --config`: the instance type, the queue's MaxCount and the FSx for Lustre
throughput come from the cluster config, and the plan stays within that cluster.

FSx for Lustre throughput, as toolkit/bench/storage/expect.py has it from the AWS FSx for
Lustre User Guide: MB/s = StorageCapacity (GiB) / 1024 x PerUnitStorageThroughput (MB/s/TiB).
  2,400 GiB at 250 MB/s/TiB: 2400 / 1024 = 2.34375 TiB x 250 = 585.9375 MB/s = 0.586 GB/s
  2,400 GiB at 125 MB/s/TiB (the p4de-training preset): 292.96875 MB/s = 0.293 GB/s
main assumed 4,800 GiB (1.17 GB/s) whatever the config said.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plan.test_cli import _pctk, _plan
from toolkit.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def p5_2400(tmp_path: Path) -> Path:
    """The p5-training preset (queue gpu: 4 p5.48xlarge, MaxCount 4) with 2,400 GiB of
    PERSISTENT_2 FSx for Lustre at 250 MB/s/TiB."""
    text = (REPO / "cluster-configs" / "p5-training.yaml").read_text()
    assert "StorageCapacity: 4800\n" in text and "MaxCount: 4\n" in text
    path = tmp_path / "p5-2400.yaml"
    path.write_text(text.replace("StorageCapacity: 4800\n", "StorageCapacity: 2400\n"))
    return path


def test_config_gives_the_instance_type_queue_limit_and_fsx_throughput(capsys, p5_2400):
    code, plan = _plan(capsys, "--config", str(p5_2400), "--model", "8b", "--tokens", "1T")
    assert code == 0
    inputs = plan["inputs"]
    assert inputs["instance_type"]["value"] == "p5.48xlarge"
    assert inputs["instance_type"]["source"] == "--config: queue gpu, compute resource p5"
    assert inputs["queue"]["value"] == "gpu" and inputs["queue_max_nodes"]["value"] == 4
    assert inputs["fsx_capacity_gib"]["value"] == 2400
    rate = inputs["checkpoint_write_gb_per_s"]
    assert rate["value"] == pytest.approx(0.5859375)
    assert round(rate["value"], 3) == 0.586
    assert "2400 GiB = 2.34 TiB x 250 MB/s/TiB (PERSISTENT_2 SSD)" in rate["source"]
    assert plan["checkpoint"]["write_seconds"] == pytest.approx(
        plan["checkpoint"]["bytes"] / 585.9375e6)
    # no size given: the whole queue, which keeps the global batch within the bound
    assert plan["nodes"] == 4 and plan["max_nodes"] == 4
    assert plan["recommendation"]["why"] == (
        "all of queue gpu (MaxCount 4 of compute resource p5); its global batch stays <= 16M "
        "tokens/step")


def test_the_queue_maxcount_caps_a_budget_and_refuses_what_it_cannot_hold(capsys, p5_2400):
    # main proposed 23 nodes where the queue's MaxCount is 4
    code, plan = _plan(capsys, "--config", str(p5_2400), "--model", "8b", "--tokens", "1T",
                       "--budget", "1M")
    assert code == 0 and plan["nodes"] == 4
    assert plan["recommendation"]["why"].startswith("all of queue gpu (MaxCount 4")
    assert plan["recommendation"]["why"].endswith("--budget $1,000,000 would pay for more")
    main(["plan", "--config", str(p5_2400), "--model", "8b", "--tokens", "1T", "--budget",
          "1M"])
    assert "\nrecommend 4 nodes: all of queue gpu (MaxCount 4 of compute resource p5)" \
        in capsys.readouterr().out
    for argv, message in (
            (["--nodes", "23"], f"--nodes 23 is more than queue gpu of {p5_2400} holds "
                                "(MaxCount 4 of compute resource p5); fix: at most 4 nodes"),
            (["--gpus", "40"], "--gpus 40 (5 nodes) is more than queue gpu"),
            (["--model", "8b", "--tokens", "15T", "--days", "30"],
             "no size finishes in 30 days: the fastest within queue gpu (MaxCount 4 of "
             "compute resource p5) takes"),
            (["--queue", "cpu"], "queue cpu in"),
            (["--queue", "nope"], "unknown queue 'nope'"),
            (["--instance-type", "p5en.48xlarge"], "--config gives the cluster: leave out "
                                                   "--instance-type")):
        r = _pctk("plan", "--config", str(p5_2400), *argv)
        assert r.returncode == 2 and r.stdout == "", (argv, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (argv, lines)


def test_a_preset_name_with_another_per_unit_throughput(capsys):
    code, plan = _plan(capsys, "--config", "p4de-training", "--model", "8b", "--tokens", "1T")
    assert code == 0
    assert plan["instance_type"] == "p4de.24xlarge" and plan["nodes"] == 4
    assert plan["inputs"]["checkpoint_write_gb_per_s"]["value"] == pytest.approx(0.29296875)


def test_queue_picks_among_gpu_queues_and_sums_its_compute_resources(capsys, tmp_path):
    text = (REPO / "cluster-configs" / "p5-training.yaml").read_text()
    # a second GPU queue of two on-demand compute resources of p5: 2 + 6 nodes
    extra = """    - Name: big
      Networking:
        SubnetIds:
          - subnet-0123456789abcdef1
      ComputeResources:
        - Name: p5a
          InstanceType: p5.48xlarge
          MaxCount: 2
        - Name: p5b
          InstanceType: p5.48xlarge
          MaxCount: 6
"""
    marker = "    - Name: cpu\n"
    path = tmp_path / "two.yaml"
    path.write_text(text.replace(marker, extra + marker))
    code, plan = _plan(capsys, "--config", str(path), "--queue", "big", "--model", "8b",
                       "--tokens", "1T")
    assert code == 0 and plan["nodes"] == 8
    assert plan["inputs"]["queue_max_nodes"]["source"] == (
        "--config: MaxCount 2 + 6 of compute resources p5a, p5b")
    code, plan = _plan(capsys, "--config", str(path), "--model", "8b", "--tokens", "1T")
    assert plan["inputs"]["queue"]["value"] == "gpu" and plan["nodes"] == 4
