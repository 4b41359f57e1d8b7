"""One verdict rule: the report's overall line, its exit code, `results list`'s closing line
and the Prometheus overall gauge agree, and the latest FAIL of any kind (here a slow-node
sweep, which the report once summed into "Overall: PASS") is never hidden by PASSes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.record import write_record
from tests.results.records import collectives_record, fsdp_record, nccl_record
from toolkit.health.slownodes import PairResult, run_sweep, to_record
from toolkit.results.store import ResultStore

REPO = Path(__file__).resolve().parents[2]


def _sweep(slow: str | None) -> dict:
    """A real sweep's judgement and record, on given pair bandwidths (the slow node 20x)."""
    nodes = [f"n{i:02d}" for i in range(8)]
    speed = {n: (0.05 if n == slow else 1.0) for n in nodes}

    def measure(rnd: int, pairs: list[tuple[str, str]]) -> list[PairResult]:
        return [PairResult(rnd, (a, b), min(speed[a], speed[b])) for a, b in pairs]

    return to_record(run_sweep(nodes, measure), partition="cpu", job_ids=["7"])


def _pctk(db: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *argv, "--db", str(db)],
                          capture_output=True, text=True, timeout=180, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(db.parent),
                               "PCTK_HOME": str(db.parent / "state"), "COLUMNS": "200"})


def _prometheus_overall(db: Path, tmp: Path) -> float:
    out = tmp / "pctk.prom"
    r = _pctk(db, "results", "prometheus", "--out", str(out))
    assert r.returncode in (0, 1), r.stderr
    line = next(x for x in out.read_text().splitlines()
                if x.startswith("pctk_overall_verdict_status"))
    return float(line.split()[-1])


def test_a_failed_sweep_among_passes_makes_every_summary_fail(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    failed = _sweep("n05")
    assert failed["verdict"]["status"] == "FAIL"
    with ResultStore(db) as store:
        for rec in (nccl_record(), collectives_record(), fsdp_record()):
            assert rec["verdict"]["status"] == "PASS"
            store.add(rec)
        store.add(failed)

    r = _pctk(db, "report", "--out", str(tmp_path / "r.html"))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "overall: FAIL" in r.stdout
    html = (tmp_path / "r.html").read_text()
    assert "Overall: FAIL" in html and "Overall: PASS" not in html
    assert "slow-nodes" in html.split('id="verdict"')[1].split("</div>")[0]

    listed = _pctk(db, "results", "list")
    assert listed.returncode == 0, listed.stderr
    last = listed.stdout.strip().splitlines()[-1]
    assert "FAIL" in last and "slow-nodes" in last, listed.stdout

    assert _prometheus_overall(db, tmp_path) == 2.0  # FAIL

    # a newer sweep that passes replaces the FAIL: every summary says PASS again
    healthy = _sweep(None)
    assert healthy["verdict"]["status"] == "PASS"
    write_record(tmp_path / "healthy.json", healthy)
    assert _pctk(db, "results", "add", str(tmp_path / "healthy.json")).returncode == 0
    r = _pctk(db, "report", "--out", str(tmp_path / "r2.html"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["overall"] == "PASS"
    assert _prometheus_overall(db, tmp_path) == 0.0
