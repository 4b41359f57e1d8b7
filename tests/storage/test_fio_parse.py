"""fio's JSON report, parsed from real fio 3.33 output (fixtures/README.md says how it was
captured), and the job files the benchmark hands to fio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.storage import fio

FIXTURES = Path(__file__).parent / "fixtures"


def raw(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_sequential_write_report() -> None:
    text = (FIXTURES / "fio-3.33-seq-write.json").read_text()
    res = fio.parse_report(text, "write")
    job = raw("fio-3.33-seq-write.json")["jobs"][0]
    assert res.version == "fio-3.33"
    assert res.io_bytes == 2 * 8 * 1024 * 1024 == job["write"]["io_bytes"]
    assert res.runtime_ms == job["write"]["runtime"] > 0
    assert res.total_ios == 16  # 16 blocks of 1 MiB
    assert res.error == 0
    assert res.lat_p50_us is not None and res.lat_p99_us is not None
    assert 0 < res.lat_p50_us <= res.lat_p99_us


def test_random_read_report_percentiles_in_microseconds() -> None:
    res = fio.parse_report((FIXTURES / "fio-3.33-randread.json").read_text(), "read")
    pct = raw("fio-3.33-randread.json")["jobs"][0]["read"]["clat_ns"]["percentile"]
    assert res.lat_p50_us == pytest.approx(pct["50.000000"] / 1000)
    assert res.lat_p99_us == pytest.approx(pct["99.000000"] / 1000)
    assert res.io_bytes == res.total_ios * 4096
    assert res.iops > 0


def test_warning_lines_before_the_report_are_skipped() -> None:
    text = "fio: this platform does not support process shared mutexes\n" + (
        FIXTURES / "fio-3.33-seq-write.json").read_text()
    assert fio.parse_report(text, "write").io_bytes == 16 * 1024 * 1024


@pytest.mark.parametrize("text, message", [
    ("", "no JSON report"),
    ("{\"jobs\": [", "does not parse"),
    ("{\"jobs\": []}", "lists no jobs"),
])
def test_unusable_reports(text: str, message: str) -> None:
    with pytest.raises(fio.FioError, match=message):
        fio.parse_report(text, "read")


def test_job_file_runs_on_real_fio(tmp_path: Path) -> None:
    job = fio.FioJob(name="seq", rw="write", directory=tmp_path, size_mib=2, numjobs=2,
                     direct=False, end_fsync=True)
    (tmp_path / "w.fio").write_text(job.text())
    res = fio.run(tmp_path / "w.fio", tmp_path / "w.json")
    assert res.io_bytes == 4 * 1024 * 1024
    assert sorted(p.name for p in tmp_path.glob("seq.*")) == ["seq.0.0", "seq.1.0"]
    read = fio.FioJob(name="seq", rw="read", directory=tmp_path, size_mib=2, numjobs=2,
                      direct=False)
    (tmp_path / "r.fio").write_text(read.text())
    assert fio.run(tmp_path / "r.fio", tmp_path / "r.json").io_bytes == 4 * 1024 * 1024


JSONPLUS = ("fio-3.33-randread-jsonplus-1job.json", "fio-3.33-randread-jsonplus-2jobs.json")


@pytest.mark.parametrize("name", JSONPLUS)
def test_percentiles_from_the_bins_are_the_ones_fio_printed(name: str) -> None:
    res = fio.parse_report((FIXTURES / name).read_text(), "read")
    clat = raw(name)["jobs"][0]["read"]["clat_ns"]
    assert res.clat_bins_ns is not None
    assert sum(count for _v, count in res.clat_bins_ns) == res.total_ios > 1000
    for pct, value in clat["percentile"].items():
        assert fio.percentile_of_bins(res.clat_bins_ns, float(pct)) == value, pct


def test_a_plain_json_report_has_no_bins() -> None:
    res = fio.parse_report((FIXTURES / "fio-3.33-randread.json").read_text(), "read")
    assert res.clat_bins_ns is None


def _node(res: fio.FioResult, with_bins: bool = True) -> dict:
    figures = {"ios": res.total_ios, "seconds": res.runtime_ms / 1000, "iops": res.iops,
               "bytes": res.io_bytes, "lat_p50_us": res.lat_p50_us,
               "lat_p99_us": res.lat_p99_us}
    if with_bins:
        figures["clat_bins_ns"] = [list(b) for b in res.clat_bins_ns or ()]
    return figures


def test_latency_percentiles_merge_every_nodes_ios() -> None:
    from benchmarks.storage.aggregate import random_reads

    results = [fio.parse_report((FIXTURES / n).read_text(), "read") for n in JSONPLUS]
    merged = random_reads({"a": _node(results[0]), "b": _node(results[1])})
    every_io = sorted(v for r in results for v, count in r.clat_bins_ns or () for _ in
                      range(count))
    assert len(every_io) == merged["total_ios"]
    for pct, key in ((50, "lat_p50_us"), (99, "lat_p99_us")):
        nearest_rank = every_io[-(-pct * len(every_io) // 100) - 1]  # ceil(p/100 N), 1-based
        assert merged[key] == nearest_rank / 1000
        per_node = sorted(getattr(r, key) for r in results)
        assert per_node[0] <= merged[key] <= per_node[1]
    assert "2 node(s)" in merged["lat_merged_from"]
    assert str(merged["total_ios"]) in merged["lat_merged_from"]

    unmerged = random_reads({"a": _node(results[0]), "b": _node(results[1], False)})
    assert unmerged["lat_p99_us"] is None and "not merged" in unmerged["lat_merged_from"]
    assert unmerged["lat_p99_us_worst_node"] == max(r.lat_p99_us for r in results)
