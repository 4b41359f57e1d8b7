"""The scaling study and the diagnosis on the twin, proved with its real faults.

The twin's nodes share this machine's CPUs: a fault-free ladder is diagnosed as
``twin-shared-cpu`` and blames no node. Each fault is real (a ``tc`` shaped link, a cgroup
CPU quota, a cgroup block-I/O limit on the checkpoint disk) and must be named by
``pctk diagnose`` on the record of a 4-node FSDP run; the fixtures clear the fault even
when the test fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.twinutil import TwinHandle
from toolkit.local import faults

pytestmark = pytest.mark.twin
CPU_NODES = ["--partition", "cpu", "--tasks-per-node", "1", "--gpus-per-node", "0"]
SLOW = "cpu-dy-c5-3"  # rank 2 of 4: see test_slow_link_is_interconnect_on_its_node


def pctk_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    from toolkit.cli import main

    capsys.readouterr()
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def fsdp_run(capsys: pytest.CaptureFixture[str], run_dir: Path, *extra: str) -> dict:
    code, rec = pctk_json(capsys, "bench", "fsdp", "--model", "tiny", "--nodes", "4",
                          *CPU_NODES, "--run-dir", str(run_dir), "--timeout", "600", *extra)
    log = "\n".join(p.read_text() for p in run_dir.glob("slurm-*.out"))
    assert rec.get("kind") == "fsdp", (code, log)
    return rec


def diagnosis(capsys: pytest.CaptureFixture[str], run_dir: Path) -> dict:
    code, verdict = pctk_json(capsys, "diagnose", str(run_dir / "record.json"))
    assert code == 0, verdict
    return verdict


def test_weak_scaling_ladder_blames_the_shared_cpus_not_a_node(
        twin: TwinHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = pctk_json(capsys, "bench", "scaling", "--nodes", "1,2,4", "--model", "tiny",
                          *CPU_NODES, "--steps", "8", "--run-dir", str(tmp_path),
                          "--timeout", "600")
    logs = "\n".join(p.read_text() for p in tmp_path.rglob("slurm-*.out"))
    assert code == 0, logs
    rec = out["record"]
    assert rec["kind"] == "scaling" and rec["params"]["mode"] == "weak"
    assert rec["params"]["nodes"] == [1, 2, 4] and len(rec["params"]["records"]) == 3
    sizes = rec["metrics"]["sizes"]
    assert [s["nodes"] for s in sizes] == [1, 2, 4]
    assert [s["world_size"] for s in sizes] == [1, 2, 4]
    for s in sizes:
        parts = s["breakdown_s"]
        assert parts["step"] > 0 and parts["compute"] > 0, s
        # the parts add up to the independently measured step (logging aside)
        total = sum(parts[k] for k in ("compute", "exposed_comm", "optimizer", "sync", "data",
                                        "checkpoint"))
        assert total == pytest.approx(parts["step"], rel=0.10), parts
        assert s["predicted"]["busbw_source"], s
    assert sizes[0]["efficiency"] == pytest.approx(1.0)
    assert sizes[0]["diagnosis"]["bottleneck"] != "twin-shared-cpu"  # one node shares nothing
    verdict = rec["metrics"]
    assert verdict["bottleneck"] == "twin-shared-cpu", verdict["evidence"]
    assert verdict["node"] is None and all(s["diagnosis"]["node"] is None for s in sizes)
    assert all(Path(p).stat().st_size > 1000 for p in out["plots"])
    # the per-size records and the scaling record were stored: diagnose finds one by id
    code, again = pctk_json(capsys, "diagnose", rec["params"]["records"][-1])
    assert code == 0 and again["bottleneck"] == "twin-shared-cpu"


@pytest.fixture
def clear_faults(twin: TwinHandle) -> Iterator[TwinHandle]:
    try:
        yield twin
    finally:
        faults.clear(twin.state_dir)


def test_slow_link_is_interconnect_on_its_node(clear_faults: TwinHandle, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # gloo on the twin listens on 127.0.0.1 for every node, so only the connections the slow
    # node opened carry its address; a middle rank (rank 2) opens one to a ring neighbour
    faults.slow_net(clear_faults.state_dir, SLOW, "50mbit")
    fsdp_run(capsys, tmp_path, "--steps", "6")
    verdict = diagnosis(capsys, tmp_path)
    assert verdict["bottleneck"] == "interconnect", verdict["evidence"]
    assert verdict["node"] == SLOW


def test_slow_cpu_is_a_straggler_on_its_node(clear_faults: TwinHandle, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # as in tests/fsdp/test_stragglers_twin.py: 200 probe matmuls make the 0.1 CPU quota bite
    faults.slow_cpu(clear_faults.state_dir, SLOW, 0.1)
    fsdp_run(capsys, tmp_path, "--steps", "10", "--probe-matmuls", "200")
    verdict = diagnosis(capsys, tmp_path)
    assert verdict["bottleneck"] == "straggler", verdict["evidence"]
    assert verdict["node"] == SLOW


def test_slow_checkpoint_disk_is_storage(clear_faults: TwinHandle, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    # 256 KiB/s for reads and writes on the disk of the checkpoint folder, for one node's jobs:
    # its shards (fsync'd by the checkpoint writer) take seconds, and every rank waits
    faults.slow_storage(clear_faults.state_dir, SLOW, "256k", tmp_path)
    fsdp_run(capsys, tmp_path, "--steps", "8", "--ckpt-every", "2")
    verdict = diagnosis(capsys, tmp_path)
    assert verdict["bottleneck"] == "storage", verdict["evidence"]
    assert verdict["shares"]["checkpoint"] >= 0.25
