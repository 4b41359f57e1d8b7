"""Storage records in the results store: compare flags a drop, Prometheus carries gauges.

The record comes from a real one-node run of the node script (small sizes); the "slower"
record is that record with the sequential read figure scaled down by 30%.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from benchmarks.record import check_created
from tests.results.promparse import parse
from tests.storage.test_node import run_node
from toolkit.results.compare import compare_records
from toolkit.results.metrics import headline
from toolkit.results.prometheus import write_textfile
from toolkit.results.store import ResultStore


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("storage-results")
    r = run_node(tmp / "t", tmp / "out")
    assert r.returncode == 0, r.stderr
    rec: dict[str, Any] = json.loads((tmp / "out" / "record.json").read_text())
    rec["cluster"].update(name="train-a", instance_type="p5.48xlarge")
    return rec


def slower(rec: dict[str, Any], phase: str, factor: float) -> dict[str, Any]:
    out = copy.deepcopy(rec)
    out["id"] = uuid.uuid4().hex
    later = check_created(rec["created"]) + dt.timedelta(hours=1)  # the newer run
    out["created"] = later.strftime("%Y-%m-%dT%H:%M:%SZ")
    out["metrics"][phase]["mb_per_s"] *= factor
    return out


def test_compare_flags_a_read_drop_and_nothing_else(measured: dict[str, Any]) -> None:
    comp = compare_records(slower(measured, "seq_read", 0.7), measured)
    assert [p.metric for p in comp.regressions] == ["seq_read_mb_per_s"]
    assert comp.regressions[0].change == pytest.approx(-0.3)
    compared = {p.metric for p in comp.points}
    assert {"seq_write_mb_per_s", "rand_read_iops", "meta_create_per_s",
            "ckpt_read_mb_per_s", "seq_read_shared_mb_per_s"} <= compared
    assert compare_records(measured, measured).regressions == []


def test_headline_and_prometheus_gauges(measured: dict[str, Any], tmp_path: Path) -> None:
    assert "MB/s" in headline(measured) and "IOPS" in headline(measured)
    store = ResultStore(tmp_path / "results.db")
    store.set_baseline(store.add(measured))
    store.add(slower(measured, "seq_read", 0.7))
    path, _n = write_textfile(store, tmp_path / "pctk.prom", 0.05)
    families = parse(path.read_text())
    throughput = {s[0]["phase"]: s[1]
                  for s in families["pctk_storage_throughput_bytes_per_second"]["samples"]}
    assert throughput["seq_read"] == pytest.approx(
        measured["metrics"]["seq_read"]["mb_per_s"] * 0.7 * 1e6)
    assert families["pctk_storage_iops"]["samples"][0][1] > 0
    regressions = {s[0]["kind"]: s[1] for s in families["pctk_baseline_regressions"]["samples"]}
    assert regressions["storage"] == 1


def test_report_plots_throughput_against_node_count(measured: dict[str, Any],
                                                    tmp_path: Path) -> None:
    from toolkit.results.report import build_report

    store = ResultStore(tmp_path / "results.db")
    store.add(measured)
    two = slower(measured, "seq_read", 1.8)
    two["params"]["nodes"] = 2
    store.add(two)
    html = build_report(store)
    section = html.split("<h2>Storage: shared file system throughput</h2>", 1)[1]
    section = section.split("</section>", 1)[0]
    assert 'alt="storage throughput against node count' in section
    assert "data:image/png;base64," in section
    assert 'data-points="12"' in section  # 6 throughput phases x 2 node counts
    assert "train-a" in section and "IOPS" in section


def test_report_plots_a_block_size_sweep(tmp_path: Path) -> None:
    """A real one-node sweep at 1M and 512k: one line per phase and block size against node
    count, and MB/s against block size for the run."""
    from toolkit.results.report import build_report

    r = run_node(tmp_path / "t", tmp_path / "out", "--phases", "seq,ckpt",
                 "--block-sizes", "1M,512k")
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "out" / "record.json").read_text())
    store = ResultStore(tmp_path / "results.db")
    store.add(rec)
    html = build_report(store)
    section = html.split("<h2>Storage: shared file system throughput</h2>", 1)[1]
    section = section.split("</section>", 1)[0]
    # 4 phases x 2 block sizes at one node count
    assert 'alt="storage throughput against node count, per phase and block size" ' \
           'data-points="8"' in section
    assert 'alt="storage throughput against block size, latest run" data-points="8"' in section


def _pctk_compare(db: Path) -> tuple[int, dict[str, Any]]:
    r = subprocess.run([str(Path(sys.executable).parent / "pctk"), "results", "compare",
                        "--kind", "storage", "--json", "--db", str(db)],
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout)


def later(rec: dict[str, Any], hours: int, factor: float = 1.0) -> dict[str, Any]:
    out = slower(rec, "seq_read", factor)
    when = check_created(rec["created"]) + dt.timedelta(hours=hours)
    out["created"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    out["verdict"] = {"status": "PASS", "reasons": []}
    return out


def test_pctk_results_compare_flags_a_storage_drop(measured: dict[str, Any],
                                                    tmp_path: Path) -> None:
    """Against a manual baseline, and against the run's own history without one."""
    manual = tmp_path / "manual.db"
    with ResultStore(manual) as store:
        store.set_baseline(store.add(measured))
        store.add(slower(measured, "seq_read", 0.7))
    code, out = _pctk_compare(manual)
    assert code == 1 and out["regressed"] is True
    [comp] = out["comparisons"]
    assert [p["metric"] for p in comp["points"] if p["regression"]] == ["seq_read_mb_per_s"]

    automatic = tmp_path / "automatic.db"
    with ResultStore(automatic) as store:
        for hours in (1, 2, 3):  # three passing runs at the measured figures
            store.add(later(measured, hours))
        store.add(later(measured, 4, 0.7))
    code, out = _pctk_compare(automatic)
    assert code == 1, out
    [comp] = out["comparisons"]
    assert comp["baseline_id"] == "automatic"
    assert [p["metric"] for p in comp["points"] if p["regression"]] == ["seq_read_mb_per_s"]
    assert {"seq_write_mb_per_s", "rand_read_iops", "ckpt_read_mb_per_s"} <= {
        p["metric"] for p in comp["points"]}


def test_a_twin_run_says_the_local_disk_stood_in_for_fsx(
        measured: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.bench.storage.cli import print_table
    from toolkit.bench.storage.driver import apply_verdict
    from toolkit.results.report import build_report
    from toolkit.results.reportparts import esc
    from toolkit.twinnote import STAND_INS, twin_caveat

    # judged against a small FSx for Lustre whose MountDir holds the run's target folder
    mount = str(Path(measured["params"]["target"]).parent)
    config = {"SharedStorage": [{"Name": "fsx", "StorageType": "FsxLustre", "MountDir": mount,
                                 "FsxLustreSettings": {"StorageCapacity": 1200,
                                                       "DeploymentType": "PERSISTENT_2",
                                                       "PerUnitStorageThroughput": 125}}]}
    real = apply_verdict(copy.deepcopy(measured), config, None)
    assert any("of expected" in r for r in real["verdict"]["reasons"]), real["verdict"]
    twin = copy.deepcopy(real)
    twin["cluster"]["twin"] = True  # what benchmarks.record sets under the twin's slurmctld
    caveat = twin_caveat(twin)
    assert caveat is not None and STAND_INS["storage"] in caveat

    print_table(twin)
    out = " ".join(capsys.readouterr().out.split())  # rich may wrap a long line
    assert "of expected" in out and caveat in out
    print_table(real)
    assert "local twin" not in capsys.readouterr().out

    # the report's badge on that run carries the same words
    with ResultStore(tmp_path / "results.db") as store:
        store.add(twin)
        html = build_report(store)
    storage = html.split("<h2>Storage", 1)[1].split("</section>")[0]
    assert f'title="{esc(caveat)}"' in storage
