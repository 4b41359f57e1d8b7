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
