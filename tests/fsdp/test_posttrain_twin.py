"""`pctk bench fsdp --workload sft|rl` on 2 nodes of the local Slurm twin (cpu partition,
gloo): the job runs across both nodes, writes a record with the workload's figures and the
command stores it in the results database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.results.metrics import headline
from toolkit.results.store import ResultStore

pytestmark = pytest.mark.twin


def bench(tmp_path: Path, *flags: str) -> tuple[dict, str]:
    """The record of a 2-node run and the report of the database it was stored in."""
    from toolkit.cli import main
    from toolkit.results.report import build_report

    db = tmp_path / "results.db"
    code = main(["bench", "fsdp", "--model", "tiny", "--nodes", "2", "--tasks-per-node", "1",
                 "--gpus-per-node", "0", "--partition", "cpu", "--steps", "4",
                 "--run-dir", str(tmp_path / "run"), "--timeout", "180", "--db", str(db),
                 *flags])
    log = "\n".join(p.read_text() for p in (tmp_path / "run").glob("slurm-*.out"))
    assert code == 0, log
    rec = json.loads((tmp_path / "run" / "record.json").read_text())
    assert rec["params"]["world_size"] == 2 and rec["params"]["nodes"] == 2
    with ResultStore(db) as store:
        stored = store.list(kind="fsdp")
        assert [r["id"] for r in stored] == [rec["id"]]
        report = build_report(store)
    return rec, report.split("<h2>Training: throughput and MFU</h2>", 1)[1]


def test_sft_on_two_nodes(twin, tmp_path: Path) -> None:
    rec, report = bench(tmp_path, "--workload", "sft")
    assert "[sft]" in report and "real tok/s/GPU" in report
    assert rec["params"]["workload"] == "sft" and rec["params"]["seq_len"] == 1024
    w = rec["metrics"]["sft"]
    assert w["packed"] and w["real_tokens_per_s_per_gpu"] > 0
    assert w["padding_fraction_packed"] < w["padding_fraction_unpacked"]
    assert "real tok/s/GPU" in headline(rec)


def test_rl_on_two_nodes(twin, tmp_path: Path) -> None:
    rec, report = bench(tmp_path, "--workload", "rl")
    assert 'alt="RL phase split per iteration' in report and 'data-points="16"' in report
    assert rec["params"]["workload"] == "rl"
    w = rec["metrics"]["rl"]
    assert [it["step"] for it in w["iterations"]] == [1, 2, 3, 4]
    assert w["bound_by"] in ("generation", "reward", "training", "weight_sync")
    assert w["weight_sync_bytes"] > 0 and w["generation_tokens_per_s_per_gpu"] > 0
