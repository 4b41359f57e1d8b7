"""Records made on the twin say so, and the report marks them; other clusters are not marked."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.record import _on_twin, new_record
from toolkit.results.report import build_report
from toolkit.results.store import ResultStore

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.twin
def test_a_record_made_in_a_twin_job_is_marked_and_the_report_shows_it(twin, tmp_path):
    out = tmp_path / "record.json"
    code = ("import json,sys; from benchmarks.record import new_record; "
            "json.dump(new_record('health', status='PASS'), open(sys.argv[1], 'w'))")
    script = f"cd {REPO}\nsrun {sys.executable} -c {json.dumps(code)} {out}\n"
    state, _ = twin.run(script, "--nodes=1", "--partition=cpu")
    assert state == "COMPLETED"
    record = json.loads(out.read_text())
    assert record["cluster"]["twin"] is True
    assert record["cluster"]["name"] == "p5_training"
    with ResultStore(tmp_path / "results.db") as store:
        store.add(record)
        text = build_report(store)
    assert 'class="twin"' in text and "local twin for 1 of 1 result(s)" in text


def test_a_record_outside_slurm_is_not_marked(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no scontrol: no Slurm here
    assert new_record("health")["cluster"]["twin"] is False


def test_only_a_loopback_controller_counts_as_the_twin():
    assert _on_twin({"SlurmctldHost[0]": "vm(127.0.0.1)"})
    assert not _on_twin({"SlurmctldHost[0]": "ip-10-0-0-12(10.0.0.12)"})
    assert not _on_twin({"SlurmctldHost[0]": "ip-10-0-0-12"})
    assert not _on_twin({})


def test_a_report_without_twin_records_has_no_twin_mark(tmp_path):
    with ResultStore(tmp_path / "results.db") as store:
        rec = new_record("health", status="PASS",
                         cluster={"name": "prod", "instance_type": "p5.48xlarge", "twin": False})
        store.add(rec)
        text = build_report(store)
    assert 'class="twin"' not in text and "Overall: PASS" in text

