"""Provisioned throughput from cluster configs, and the PASS/WARN/FAIL thresholds."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.bench.storage import expect
from toolkit.config.yamlio import load_yaml

REPO = Path(__file__).resolve().parents[2]


def fsx(kind: str, capacity: int = 2400, per_unit: int | None = None,
        storage: str | None = None) -> dict:
    settings: dict = {"StorageCapacity": capacity, "DeploymentType": kind}
    if per_unit is not None:
        settings["PerUnitStorageThroughput"] = per_unit
    if storage:
        settings["StorageType"] = storage
    return {"Name": "fsx", "StorageType": "FsxLustre", "MountDir": "/fsx",
            "FsxLustreSettings": settings}


def test_shipped_p5_config_provisions_capacity_times_per_unit() -> None:
    config = load_yaml(REPO / "cluster-configs" / "p5-training.yaml")
    entry = expect.mount_for(config, "/fsx/bench/run1")
    assert entry is not None and entry["MountDir"] == "/fsx"
    prov = expect.provisioned(entry)
    assert prov is not None
    assert prov.mb_per_s == pytest.approx(4800 / 1024 * 250)  # PERSISTENT_2, 250 MB/s/TiB
    assert expect.first_mount_dir(config) == "/fsx"
    assert expect.provisioned(expect.mount_for(config, "/home/me")) is None  # EFS


@pytest.mark.parametrize("entry, mb_per_s", [
    (fsx("SCRATCH_2", 1200), 1200 / 1024 * 200),
    (fsx("PERSISTENT_1", 2400, 50), 2400 / 1024 * 50),
    (fsx("PERSISTENT_1", 6000, 12, "HDD"), 6000 / 1024 * 12),
    (fsx("PERSISTENT_2", 2400, 1000), 2400 / 1024 * 1000),
])
def test_deployment_types(entry: dict, mb_per_s: float) -> None:
    prov = expect.provisioned(entry)
    assert prov is not None and prov.mb_per_s == pytest.approx(mb_per_s)


@pytest.mark.parametrize("entry", [
    fsx("PERSISTENT_2", 2400, 50),  # 50 is a PERSISTENT_1 figure
    fsx("PERSISTENT_1", 2400, 200, "HDD"),
    {**fsx("PERSISTENT_2", 2400, 250),
     "FsxLustreSettings": {"FileSystemId": "fs-0123456789abcdef0"}},
    {"Name": "scratch", "StorageType": "Ebs", "MountDir": "/scratch"},
])
def test_no_expectation_without_a_provisioned_figure(entry: dict) -> None:
    assert expect.provisioned(entry) is None


def test_mount_match_is_by_path_component_and_deepest() -> None:
    config = {"SharedStorage": [fsx("SCRATCH_2"),
                                {**fsx("SCRATCH_2"), "MountDir": "/fsx/deep"}]}
    assert expect.mount_for(config, "/fsxother/x") is None
    deep = expect.mount_for(config, "/fsx/deep/run")
    assert deep is not None and deep["MountDir"] == "/fsx/deep"


def test_thresholds_and_the_lower_expectation_wins() -> None:
    prov = expect.Provisioned("/fsx", 1000.0, "test")
    assert expect.judge({"seq_read": 800.0}, prov, None)[0] == "PASS"
    assert expect.judge({"seq_read": 799.0}, prov, None)[0] == "WARN"
    assert expect.judge({"seq_read": 500.0}, prov, None)[0] == "WARN"
    assert expect.judge({"seq_read": 499.0}, prov, None)[0] == "FAIL"
    # the worst phase decides
    assert expect.judge({"seq_read": 900.0, "seq_write": 100.0}, prov, None)[0] == "FAIL"
    # a 1 Gbit/s client ceiling (125 MB/s) is lower than the provisioned 1000 MB/s
    status, reasons, expected = expect.judge({"seq_read": 110.0}, prov,
                                             expect.client_ceiling(1, 1))
    assert (status, expected) == ("PASS", 125.0)
    assert "client network ceiling" in reasons[0]
    assert expect.judge({"seq_read": 1.0}, None, 125.0)[0] == "UNKNOWN"


def test_checkpoint_phases_are_judged_like_the_sequential_ones() -> None:
    from toolkit.bench.storage.driver import apply_verdict

    config = {"SharedStorage": [fsx("PERSISTENT_2", 1200, 1000, "SSD")]}  # 1,172 MB/s
    figures = {"seq_write": 1100.0, "seq_read": 1150.0, "seq_write_shared": 1.0,
               "rand_read": None, "ckpt_write": 400.0, "ckpt_read": 1100.0}
    rec = {"params": {"target": "/fsx/bench", "nodes": 2},
           "metrics": {phase: {"mb_per_s": v} for phase, v in figures.items()}}
    judged = apply_verdict(rec, config, None)["verdict"]
    assert judged["status"] == "FAIL", judged  # the checkpoint write: 34% of expected
    assert any(r.startswith("ckpt_write 400 MB/s = 34%") and r.endswith("FAIL")
               for r in judged["reasons"]), judged
    assert any(r.startswith("ckpt_read") and r.endswith("PASS") for r in judged["reasons"])
    assert not any(r.startswith("seq_write_shared") for r in judged["reasons"])
    rec["metrics"]["ckpt_write"]["mb_per_s"] = 1000.0
    assert apply_verdict(rec, config, None)["verdict"]["status"] == "PASS"
