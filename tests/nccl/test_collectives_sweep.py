"""The torch.distributed sweep on 2 and 4 local gloo ranks, the Slurm driver, the twin run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.collectives import main, use_cuda_graphs
from benchmarks.record import read_record
from benchmarks.vocab import busbw_factor, canonical_collective, parse_bytes, sweep_sizes
from tests.ports import rendezvous_port
from toolkit.bench.collectives.driver import SweepJob, sbatch_command, wait_for_job
from toolkit.bench.comm.record import runs_from_record
from toolkit.bench.comm.verdict import judge

REPO = Path(__file__).resolve().parents[2]


def _rank_main(rank: int, world: int, port: int, out: str, extra: list[str]) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from benchmarks import collectives

    rc = collectives.main(["--min-bytes", "64", "--max-bytes", "256K", "--iters", "3",
                           "--warmup", "1", "--backend", "gloo", "--out", out, *extra])
    if rc != 0:
        raise SystemExit(rc)


@pytest.mark.parametrize(("world", "reduction"), [(2, "mean"), (4, "max")])
def test_sweep_on_local_gloo_ranks(tmp_path: Path, world: int, reduction: str) -> None:
    import torch.multiprocessing as mp

    out = tmp_path / "record.json"
    extra = [] if reduction == "mean" else ["--time-reduction", reduction]
    mp.spawn(_rank_main, args=(world, rendezvous_port(), str(out), extra), nprocs=world, join=True)
    rec = read_record(out)
    # the record states its timing conventions: nccl-tests' -a 1 (mean) by default
    timing = rec["params"]["timing"]
    assert timing["time_reduction"] == reduction
    assert timing["nccl_tests_equivalent"].startswith({"mean": "-a 1", "max": "-a 3"}[reduction])
    assert rec["params"]["launch"] == "eager" and rec["params"]["cuda_graph"] == "auto"
    assert rec["kind"] == "collectives" and rec["verdict"]["status"] == "PASS"
    assert rec["params"]["world_size"] == world and rec["params"]["backend"] == "gloo"
    blocks = rec["metrics"]["collectives"]
    assert [b["collective"] for b in blocks] == ["all_reduce", "all_gather", "reduce_scatter",
                                                 "alltoall", "broadcast"]
    for b in blocks:
        assert b["nranks"] == world and b["format"] == "torch"
        if b.get("unsupported"):  # gloo without reduce_scatter (older torch): said, not faked
            assert b["collective"] == "reduce_scatter" and b["rows"] == []
            continue
        assert len(b["rows"]) >= 10
        factor = busbw_factor(b["collective"], world)
        for row in b["rows"]:
            placement = ("in_place" if b["collective"] in ("all_reduce", "broadcast")
                         else "out_of_place")
            m = row[placement]
            assert m["wrong"] == 0, (b["collective"], row["size_bytes"])
            assert math.isfinite(m["time_us"]) and m["time_us"] > 0
            # gloo: one Python call per iteration; small sizes are flagged, large ones not
            assert row["launch"] == "eager"
            assert row["launch_bound"] is (row["size_bytes"] < 64 * 1024)
            assert m["algbw_gbps"] == pytest.approx(row["size_bytes"] / m["time_us"] / 1e3)
            assert m["busbw_gbps"] == pytest.approx(m["algbw_gbps"] * factor)
        sizes = [r["size_bytes"] for r in b["rows"]]
        assert b["timing"]["time_reduction"] == reduction
        assert b["avg_busbw_sizes"] == [min(sizes), max(sizes)]
        assert b["launch_bound_below_bytes"] == 64 * 1024
        large = [(r["out_of_place"] or r["in_place"])["busbw_gbps"] for r in b["rows"]
                 if not r["launch_bound"]]
        assert b["avg_busbw_gbps_not_launch_bound"] == pytest.approx(sum(large) / len(large))
        assert any("depends on the size range" in note for note in b["notes"])
        assert any("launch-bound" in note for note in b["notes"])
    # the driver side reads the same layout and agrees that everything follows
    runs = runs_from_record(rec)
    assert all(r.inconsistencies == [] for r in runs)
    assert all(judge(r).status in ("PASS", "WARN") for r in runs)


def test_cuda_graphs_only_where_the_backend_can_be_captured() -> None:
    import torch

    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert use_cuda_graphs("auto", "nccl", gpu) is True
    assert use_cuda_graphs("auto", "gloo", cpu) is False
    assert use_cuda_graphs("auto", "gloo", gpu) is False
    assert use_cuda_graphs("off", "nccl", gpu) is False
    with pytest.raises(ValueError, match="needs nccl on CUDA"):
        use_cuda_graphs("on", "gloo", cpu)


@pytest.mark.parametrize("argv", [["--cuda-graph", "on", "--backend", "gloo"],
                                  ["--time-reduction", "median"], ["--iters", "0"],
                                  ["--launch-bound-below", "lots"]])
def test_bad_sweep_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusal
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err and err.strip()


def test_sizes_and_factors_match_nccl_tests() -> None:
    assert sweep_sizes(1000, 8192) == [1024, 2048, 4096, 8192]
    assert parse_bytes("16M") == 16 << 20 and parse_bytes("8") == 8
    assert busbw_factor("all_reduce", 16) == pytest.approx(1.875)
    assert busbw_factor("all_to_all", 8) == pytest.approx(7 / 8)
    assert busbw_factor("broadcast", 8) == busbw_factor("sendrecv", 2) == 1.0
    assert canonical_collective("reduce_scatter_tensor") == "reduce_scatter"


def test_sbatch_command_runs_the_repo_script_with_arguments(tmp_path: Path) -> None:
    cmd = sbatch_command(SweepJob(nodes=4, partition="cpu", max_bytes="1M"), tmp_path)
    assert cmd[:2] == ["sbatch", "--parsable"]
    assert "--nodes=4" in cmd and "--partition=cpu" in cmd and "--ntasks-per-node=1" in cmd
    script = cmd.index(str(REPO / "sbatch" / "collectives.sbatch"))
    assert cmd[script + 1:][-2:] == ["--out", str(tmp_path / "record.json")]
    assert cmd[cmd.index("--max-bytes") + 1] == "1M"


@pytest.mark.twin
def test_wait_follows_a_real_job_to_its_end(twin) -> None:
    job_id, _ = twin.sbatch("sleep 2", "--partition=cpu")
    seen: list[str] = []
    assert wait_for_job(job_id, timeout=60, poll=0.5, on_state=seen.append) == "COMPLETED"
    assert seen[-1] == "COMPLETED" and len(seen) >= 2  # it saw the job before it ended
    job_id, _ = twin.sbatch("exit 3", "--partition=cpu")
    assert wait_for_job(job_id, timeout=60, poll=0.5) == "FAILED"


def test_collectives_command_judges_an_existing_record(tmp_path: Path) -> None:
    from benchmarks.record import new_record, write_record

    block = {"collective": "all_reduce", "nranks": 2, "format": "torch", "complete": True,
             "rows": [{"size_bytes": 1024, "count": 256, "dtype": "float", "redop": "sum",
                       "root": -1, "out_of_place": None,
                       "in_place": {"time_us": 10.0, "algbw_gbps": 0.1024,
                                    "busbw_gbps": 0.1024, "wrong": 1, "error": None}}]}
    write_record(tmp_path / "rec.json", new_record("collectives",
                                                   metrics={"collectives": [block]}))
    code = "import sys; from toolkit.cli import main; sys.exit(main(sys.argv[1:]))"
    res = subprocess.run([sys.executable, "-c", code, "bench", "collectives", "--from-record",
                          str(tmp_path / "rec.json"), "--json"], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert res.returncode == 1, res.stderr
    assert any("wrong elements" in r for r in json.loads(res.stdout)["verdict"]["reasons"])


@pytest.mark.twin
def test_sweep_across_four_twin_nodes(twin, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = Path(twin.workdir) / "collectives-record.json"
    script = f"""#!/bin/bash
set -euo pipefail
cd {REPO}
export PYTHONPATH={REPO}
srun {sys.executable} -m benchmarks.collectives --min-bytes 1K --max-bytes 64K \\
    --iters 3 --warmup 1 --backend gloo --out {out}
"""
    state, output = twin.run(script, "--nodes=4", "--ntasks-per-node=1", "--partition=cpu",
                             timeout=240)
    assert state == "COMPLETED", output
    rec = read_record(out)
    assert rec["params"]["world_size"] == 4
    assert len(rec["cluster"]["hosts"]) == 4
    assert rec["verdict"]["status"] == "PASS"
    for block in rec["metrics"]["collectives"]:
        for row in block["rows"]:
            m = row["out_of_place"] or row["in_place"]
            assert m["wrong"] == 0


@pytest.mark.twin
def test_pctk_bench_collectives_submits_waits_and_judges(twin, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code = "import sys; from toolkit.cli import main; sys.exit(main(sys.argv[1:]))"
    res = subprocess.run(
        [sys.executable, "-c", code, "bench", "collectives", "--nodes", "4", "--partition",
         "cpu", "--min-bytes", "1K", "--max-bytes", "16K", "--iters", "2", "--warmup", "1",
         "--timeout", "240", "--out", str(tmp_path), "--json"],
        capture_output=True, text=True, cwd=REPO, env=twin.env, timeout=300)
    assert res.returncode == 0, res.stderr
    rec = json.loads(res.stdout)
    assert rec["verdict"]["status"] == "PASS" and rec["params"]["world_size"] == 4
    assert any(name.startswith("slurm-") for name in rec["raw_logs"])
    assert read_record(tmp_path / "record.json")["id"] == rec["id"]
