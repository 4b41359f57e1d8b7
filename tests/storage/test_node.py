"""The node script alone (one node, no Slurm: its barriers have one member), real fio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_node(target: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    return subprocess.run([sys.executable, "-m", "benchmarks.storage.node", "--target",
                           str(target), "--out-dir", str(out), "--run-id", "t",
                           "--jobs-per-node", "2", "--size-mib", "2", "--ckpt-mib", "1",
                           "--rand-seconds", "1", "--meta-files", "20", *extra],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def test_buffered_run_records_it_and_cleans_up(tmp_path: Path) -> None:
    # the automatic fallback (O_DIRECT refused) needs a file system that refuses it; tmpfs
    # accepts O_DIRECT on this kernel, so the buffered path is tested through --no-direct
    target = tmp_path / "t"
    r = run_node(target, tmp_path / "out", "--no-direct")
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "out" / "record.json").read_text())
    assert rec["metrics"]["direct_io"] is False and rec["params"]["no_direct"] is True
    for job_file in (tmp_path / "out").glob("fio-*.fio"):
        assert "direct=0" in job_file.read_text(), job_file.name
    assert rec["metrics"]["seq_read"]["total_bytes"] == 2 * 2 << 20
    assert rec["metrics"]["seq_read_shared"]["total_bytes"] == 2 * 2 << 20
    assert rec["metrics"]["meta_stat"]["total_files"] == 20
    assert list(target.iterdir()) == []


def test_direct_io_where_the_file_system_allows_it(tmp_path: Path) -> None:
    r = run_node(tmp_path / "t", tmp_path / "out", "--phases", "seq")
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "out" / "record.json").read_text())
    assert rec["metrics"]["direct_io"] is True  # ext4 under /tmp on this machine
    assert list((tmp_path / "t").iterdir()) == []


def test_unknown_phase_is_bad_input(tmp_path: Path) -> None:
    r = run_node(tmp_path / "t", tmp_path / "out", "--phases", "seq,bogus")
    assert r.returncode == 2 and "unknown phase(s) bogus" in r.stderr
    assert not (tmp_path / "t").exists()


def test_block_size_sweep_runs_each_throughput_phase_at_each_size(tmp_path: Path) -> None:
    r = run_node(tmp_path / "t", tmp_path / "out", "--phases", "seq,shared,ckpt",
                 "--block-sizes", "1M,512k")
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "out" / "record.json").read_text())
    m = rec["metrics"]
    assert rec["params"]["block_sizes"] == ["1M", "512k"]
    for phase, per_rank in (("seq_read", 2 << 20), ("seq_write_shared", 2 << 20),
                            ("ckpt_write", 1 << 20)):
        assert m[phase]["block"] == "1M" and m[f"{phase}@512k"]["block"] == "512k"
        assert m[phase]["total_bytes"] == m[f"{phase}@512k"]["total_bytes"] == 2 * per_rank
        job = (tmp_path / "out" / f"fio-{rec['cluster']['hosts'][0]}-{phase}@512k.fio")
        assert "bs=512k" in job.read_text()
    assert list((tmp_path / "t").iterdir()) == []


def test_block_size_that_does_not_fit_the_files_is_bad_input(tmp_path: Path) -> None:
    r = run_node(tmp_path / "t", tmp_path / "out", "--block-sizes", "1M,2M")
    assert r.returncode == 2 and "block size 2M does not divide --ckpt-mib 1" in r.stderr
    r = run_node(tmp_path / "t", tmp_path / "out", "--block-sizes", "1Q")
    assert r.returncode == 2 and "block size '1Q'" in r.stderr
    assert not (tmp_path / "t").exists()
