"""Every benchmark ends with one "next:" line that fits its record's kind and verdict."""

from __future__ import annotations

import pytest

from tests.results.records import collectives_record, fsdp_record, health_record, nccl_record
from toolkit.results.nextstep import next_step


def test_a_failed_straggler_run_leads_to_the_node() -> None:
    rec = fsdp_record()
    rec["verdict"] = {"status": "FAIL", "reasons": [
        "rank 1 on cpu-dy-c5-3: compute 159.9 ms a step, 14.3x the other nodes' median"]}
    line = next_step(rec)
    assert line.startswith("next: pctk diagnose ") and "pctk health drain cpu-dy-c5-3" in line


def test_a_passing_training_run_leads_to_diagnosis_scaling_and_plan() -> None:
    line = next_step(fsdp_record())
    assert "pctk diagnose" in line and "pctk bench scaling" in line and "pctk plan" in line


@pytest.mark.parametrize("make", [nccl_record, collectives_record])
def test_interconnect_runs(make) -> None:
    good = make()
    assert good["verdict"]["status"] == "PASS"
    assert next_step(good).startswith(f"next: pctk results baseline {good['id'][:12]}")
    bad = make()
    bad["verdict"] = {"status": "FAIL", "reasons": ["busbw 40% of expected"]}
    assert "pctk health slow-nodes" in next_step(bad)


def test_a_failed_health_check_leads_to_draining_its_node() -> None:
    rec = health_record(fail=("gpu-st-p5-2", "gpu_count"))
    assert rec["verdict"]["status"] == "FAIL"
    line = next_step(rec)
    assert "pctk health drain gpu-st-p5-2" in line, (rec["verdict"], line)


def test_a_failed_sweep_leads_to_the_slow_node() -> None:
    from toolkit.health.slownodes import PairResult, run_sweep, to_record

    nodes = [f"n{i:02d}" for i in range(8)]

    def measure(rnd: int, pairs: list[tuple[str, str]]) -> list[PairResult]:
        return [PairResult(rnd, (a, b), 0.05 if "n05" in (a, b) else 1.0) for a, b in pairs]

    rec = to_record(run_sweep(nodes, measure), partition="cpu", job_ids=["7"])
    assert "pctk health drain n05" in next_step(rec)


def test_the_command_ends_with_its_next_line(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from benchmarks.record import write_record

    path = write_record(tmp_path / "record.json", collectives_record())
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "bench", "collectives",
                        "--from-record", str(path), "--no-store"], capture_output=True,
                       text=True, timeout=120, cwd=Path(__file__).resolve().parents[2],
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                            "PCTK_HOME": str(tmp_path / "state"), "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("next: pctk results baseline "), \
        r.stdout
