"""The step-time breakdown, the diagnosis, the scaling study and its report section, on real
records of the FSDP benchmark (local gloo ranks on this machine, no Slurm)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.fsdp.breakdown import PARTS, adds_up
from benchmarks.record import new_record, write_record
from tests.fsdp.fsdp_launch import TINY, run_ranks
from toolkit.results.diagnose import BOTTLENECKS, diagnose, link_outlier
from toolkit.results.report import render_report
from toolkit.results.scaling import scaling_record, study
from toolkit.results.store import ResultStore


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """One rank, then two ranks standing for two nodes (a weak-scaling pair: 4 rows each)."""
    out = []
    for world, batch in ((1, 4), (2, 8)):
        folder = tmp_path_factory.mktemp(f"world{world}")
        args = [*TINY, "--steps", "6", "--batch-size", str(batch), "--ckpt-dir",
                str(folder / "ckpt"), "--ckpt-every", "3", "--no-resume"]
        run = run_ranks(world, args, folder / "record.json",
                        extra_env={"SLURM_NNODES": str(world)}, ranks_per_node=1)
        assert run.returncodes == [0] * world, run.output
        assert run.record is not None
        out.append(run.record)
    return out


def test_parts_add_up_to_the_step_on_every_rank(records: list[dict]) -> None:
    b = records[1]["metrics"]["breakdown"]
    assert b["timed_steps"] == 5 and b["clock"] == "wall clock (perf_counter)"
    assert [r["rank"] for r in b["per_rank"]] == [0, 1]
    for r in b["per_rank"]:
        assert r["compute"] > 0 and r["checkpoint"] > 0 and r["link_recv_gb_per_s"] > 0
        assert r["exposed_comm"] == pytest.approx(max(0.0, r["fwd_bwd"] - r["compute"]))
    ok, lines = adds_up(records[1], 0.10)
    assert ok, lines
    assert set(b["measured"]) >= {*PARTS, "step"}
    # one rank: no link to probe, said so
    one = records[0]["metrics"]["breakdown"]
    assert one["per_rank"][0]["link_recv_gb_per_s"] is None
    assert one["link_probe"]["note"] == "one rank: no link"


def test_diagnosis_of_a_healthy_run_names_no_node(records: list[dict]) -> None:
    for rec in records:
        verdict = diagnose(rec)
        assert verdict["bottleneck"] in BOTTLENECKS
        assert verdict["bottleneck"] not in ("straggler", "twin-shared-cpu")
        assert verdict["node"] is None and verdict["evidence"] and verdict["advice"]
    assert link_outlier(records[1]) is None  # both ranks on "node 0"


def test_pctk_diagnose_a_record_file_and_refuse_bad_input(
        records: list[dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    path = tmp_path / "record.json"
    write_record(path, records[1])
    assert main(["diagnose", str(path), "--json", "--db", str(tmp_path / "r.db")]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["record_id"] == records[1]["id"] and verdict["bottleneck"] in BOTTLENECKS
    assert main(["diagnose", str(path), "--db", str(tmp_path / "r.db")]) == 0
    assert capsys.readouterr().out.startswith("bottleneck: ")

    other = tmp_path / "health.json"
    write_record(other, new_record("health", status="PASS"))
    for ref in (str(other), "no-such-id"):
        assert main(["diagnose", ref, "--db", str(tmp_path / "r.db")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("pctk: error:") and len(err.strip().splitlines()) == 1, err


def test_study_record_and_report_section(records: list[dict], tmp_path: Path) -> None:
    result = study(records, strong=False)
    sizes = result["sizes"]
    assert [s["nodes"] for s in sizes] == [1, 2]
    assert sizes[0]["efficiency"] == pytest.approx(1.0)
    pred = sizes[1]["predicted"]
    # no stored busbw and no instance type: the run's own link probe, said so
    assert pred["busbw_source"].startswith("this run's link probe")
    assert 1.0 >= pred["efficiency_overlap"] >= pred["efficiency_no_overlap"] > 0
    rec = scaling_record(records, result, {"mode": "weak", "model": "tiny"})
    assert rec["kind"] == "scaling" and rec["params"]["records"] == [r["id"] for r in records]
    with ResultStore(tmp_path / "r.db") as store:
        for r in [*records, rec]:
            store.add(r)
        html = render_report(store).html
    section = html.split("Scaling: efficiency, step-time breakdown and bottleneck")[1]
    assert f"bottleneck: {result['bottleneck']}" in section
    assert section.count('data-points="2"') == 2  # efficiency and breakdown plots


def test_slow_storage_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    from toolkit.errors import PctkError
    from toolkit.local import faults

    for rate in ("1x", "0", "fast"):
        with pytest.raises(PctkError, match="is not a byte rate"):
            faults.parse_io_rate(rate)
    assert faults.parse_io_rate("1m") == 1 << 20 and faults.parse_io_rate("512k") == 512 << 10
    with pytest.raises(PctkError, match="not on a block device"):
        faults.block_device(Path("/proc"))
    assert faults.block_device(tmp_path).count(":") == 1


def test_a_busy_twin_hosts_probe_noise_names_no_node_a_real_cluster_gap_does(
        records: list[dict]) -> None:
    """The probe figures of a fault-free 2-node twin run on a busy host (0.815 against 4.54
    GB/s): loopback noise on the twin, a link worth checking on a real cluster."""
    rec = json.loads(json.dumps(records[1]))
    for row, (node, gbps) in zip(rec["metrics"]["breakdown"]["per_rank"],
                                 (("cpu-dy-c5-1", 4.54), ("cpu-dy-c5-2", 0.815)), strict=True):
        row["node"], row["link_recv_gb_per_s"] = node, gbps
    rec["cluster"]["twin"] = True
    assert link_outlier(rec) is None
    rec["cluster"]["twin"] = False
    assert link_outlier(rec) == ("cpu-dy-c5-2", 0.815, 4.54)
    # a shaped link on the twin (slow-net, 50 Mbit/s) is far below either line
    rec["cluster"]["twin"] = True
    rec["metrics"]["breakdown"]["per_rank"][1]["link_recv_gb_per_s"] = 0.006
    assert link_outlier(rec) == ("cpu-dy-c5-2", 0.006, 4.54)


@pytest.mark.parametrize("step,compute", [(0.9, 0.1599), (0.24674, 0.077), (0.041123, 0.0091),
                                          (0.031093, 0.0134)])
def test_a_prediction_is_never_above_one(records: list[dict], step: float,
                                         compute: float) -> None:
    """The model only adds costs to the base's step: at the base's own size it predicts
    exactly 1, at a bigger one at most 1, whatever the last bits of the figures (these pairs
    give (step - compute) + compute != step in floating point)."""
    import copy

    from toolkit.results.diagnose import Busbw
    from toolkit.results.scaling import predict

    assert (step - compute) + compute != step
    base = copy.deepcopy(records[1])
    mean = base["metrics"]["breakdown"]["mean_over_ranks"]
    mean["step"], mean["compute"] = step, compute
    busbw = Busbw(1.0, "test figure")
    same = predict(base, base, busbw, busbw, strong=False)
    assert same["efficiency_no_overlap"] == 1.0 and same["efficiency_overlap"] == 1.0
    for strong in (False, True):
        bigger = copy.deepcopy(records[1])
        bigger["params"]["world_size"] *= 2
        bigger["params"]["nodes"] *= 2
        pred = predict(base, bigger, busbw, busbw, strong=strong)
        assert 1.0 >= pred["efficiency_overlap"] >= pred["efficiency_no_overlap"] > 0


def test_pctk_diagnose_takes_the_id_a_scaling_study_printed(
        records: list[dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    db = str(tmp_path / "r.db")
    result = study(records, strong=False)
    rec = scaling_record(records, result, {"mode": "weak", "model": "tiny"})
    with ResultStore(tmp_path / "r.db") as store:
        for r in [*records, rec]:
            store.add(r)
    assert main(["diagnose", rec["id"][:12], "--db", db, "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    # the largest size's diagnosis, judged again from the stored per-size records
    assert verdict["study"] == rec["id"] and verdict["record_id"] == records[-1]["id"]
    assert verdict["bottleneck"] == result["bottleneck"] and verdict["nodes"] == 2
    # a path that is not there is said to be missing, not looked up as an id
    for ref in ("../nope/record.json", str(tmp_path / "gone.json"), str(tmp_path)):
        assert main(["diagnose", ref, "--db", db]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
        assert "does not exist" in err or "is not a regular file" in err, err


LINKS = [1.9, 1.4, 2.0, 1.2]  # GB/s: the last node receives slowest, inside the twin's noise
OTHER_PARTS = {"optimizer": 0.005, "sync": 0.002, "data": 0.001}  # seconds, fixed: the shares
# below do not depend on how busy this machine was when records[1] ran


def _four_nodes(rec: dict, compute_ms: list[float], wait_ms: list[float],
                checkpoint_s: float) -> dict:
    """records[1] made a 4-node twin run: one row a node with these computes and waits (the
    others' exposed communication), every rank saving for ``checkpoint_s`` a step."""
    import copy

    out = copy.deepcopy(rec)
    b = out["metrics"]["breakdown"]
    template = {**b["per_rank"][0], **OTHER_PARTS}
    b["per_rank"] = [{**template, "rank": i, "node": f"cpu-dy-c5-{i + 1}",
                      "compute": c / 1000, "exposed_comm": w / 1000, "checkpoint": checkpoint_s,
                      "link_recv_gb_per_s": gbps}
                     for i, (c, w, gbps) in enumerate(zip(compute_ms, wait_ms, LINKS, strict=True))]
    mean = b["mean_over_ranks"]
    mean.update(OTHER_PARTS, checkpoint=checkpoint_s, compute=sum(compute_ms) / 4000,
                exposed_comm=sum(wait_ms) / 4000)
    mean["step"] = sum(mean[k] for k in PARTS)
    mean["fwd_bwd"] = mean["compute"] + mean["exposed_comm"]
    out["params"]["nodes"], out["params"]["world_size"] = 4, 4
    out["cluster"]["twin"] = True
    out["metrics"]["stragglers"] = {"verdict": "PASS"}
    return out


def test_a_slow_disk_that_stretches_its_nodes_compute_is_storage(records: list[dict]) -> None:
    """Figures measured on a busy host: the node whose checkpoint disk was throttled to
    256 KiB/s also computed 6.5x slower (its page faults stalled on that disk) and happened to
    receive slowest in the link probe. Its saves cost seconds a step, its compute 56 ms:
    storage."""
    compute = [10.1, 9.9, 10.5, 66.0]
    wait = [60.0, 58.0, 61.0, 3.0]
    verdict = diagnose(_four_nodes(records[1], compute, wait, checkpoint_s=1.8))
    assert verdict["bottleneck"] == "storage", verdict["evidence"]
    assert verdict["shares"]["checkpoint"] >= 0.25
    assert "also: cpu-dy-c5-4's compute is 6.5x" in verdict["evidence"][1]
    # the same straggler with saves that cost less than the others' wait: the straggler
    verdict = diagnose(_four_nodes(records[1], compute, wait, checkpoint_s=0.03))
    assert verdict["shares"]["checkpoint"] >= 0.25
    assert (verdict["bottleneck"], verdict["node"]) == ("straggler", "cpu-dy-c5-4")
    assert verdict["evidence"][1].startswith("also: checkpoint saves"), verdict["evidence"]
    # no straggler: saves that are a large share are storage however short
    verdict = diagnose(_four_nodes(records[1], [10.1, 9.9, 10.5, 10.2], [3.0] * 4, 0.03))
    assert verdict["bottleneck"] == "storage" and verdict["node"] is None
