"""Tensor parallel offline inference: two gloo ranks sharing the tiny shape give the whole
model's logits (prefill, decode, the static decode step), each rank holds its share of the
weights and the KV cache, the driver picks and checks the size, and a run on the twin
shares one node's model between two processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from typer.testing import CliRunner

from benchmarks import modelmath
from benchmarks.fsdp.config import PRESETS
from benchmarks.fsdp.model import Transformer, TransformerBlock
from benchmarks.inference import tensor_parallel
from benchmarks.inference.kvcache import KVCache, decode_static, forward
from toolkit.bench.inference import driver
from toolkit.cli import app, main

TINY = PRESETS["tiny"]


def _rank(rank: int, size: int, store: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
    try:
        torch.manual_seed(0)
        full = Transformer(TINY).eval()
        tp = tensor_parallel.Group(rank=rank, size=size)
        mine = tensor_parallel.shard_of(full, tp)
        tokens = torch.randint(0, TINY.vocab_size, (3, 14), generator=torch.Generator()
                               .manual_seed(1))
        cpu = torch.device("cpu")
        with torch.inference_mode():
            want = full(tokens)
            cache = KVCache.empty(mine, 3, 14, torch.float32, cpu)
            got = [forward(mine, tokens[:, :9], cache, 0)]
            got += [forward(mine, tokens[:, p:p + 1], cache, p) for p in range(9, 13)]
            got.append(decode_static(mine, tokens[:, 13:14], cache, torch.tensor(13)))
        torch.save({"want": want, "got": torch.cat(got, dim=1), "kv": cache.nbytes,
                    "kv_heads": cache.k[0].shape[1],
                    "params": sum(p.numel() for p in mine.parameters())}, f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("size", [2])
def test_ranks_sharing_the_model_give_its_logits(tmp_path: Path, size: int) -> None:
    mp.spawn(_rank, args=(size, str(tmp_path / "store"), str(tmp_path)), nprocs=size)
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(size)]
    for r in results:
        torch.testing.assert_close(r["got"], r["want"], rtol=1e-4, atol=1e-4)
        # each rank caches its own KV heads: 1 of tiny's 2 at size 2
        assert r["kv_heads"] == TINY.n_kv_heads // size
    whole = KVCache.empty(Transformer(TINY), 3, 14, torch.float32, torch.device("cpu"))
    assert sum(r["kv"] for r in results) == whole.nbytes
    # one rank's weights are what the roofline's memory check counts for one GPU
    assert results[0]["params"] * 2 == modelmath.resident_weight_bytes(
        modelmath.shape_of(TINY), 2, tp=size)


def test_a_rank_built_from_nothing_has_its_shards_shapes() -> None:
    tp = tensor_parallel.Group(rank=1, size=2)
    model = tensor_parallel.build(TINY, tp, torch.float32, torch.device("cpu"))
    block = model.layers["0"]
    assert isinstance(block, TransformerBlock)
    attn = block.attention
    assert attn.wq.weight.shape == (2 * 16, 64) and attn.wk.weight.shape == (16, 64)
    assert attn.wo.weight.shape == (64, 32) and model.output.weight.shape == (256, 64)
    assert block.feed_forward.w2.weight.shape == (64, 128)
    assert torch.isfinite(model.output.weight).all() and model.output.weight.std() > 0
    assert tensor_parallel.of(model) is tp
    with pytest.raises(ValueError, match="3 ranks do not divide the shape's 4 query heads"):
        tensor_parallel.build(TINY, tensor_parallel.Group(0, 3), torch.float32,
                              torch.device("cpu"))


def test_70b_needs_two_h200s_four_h100s_eight_a100s() -> None:
    seventy = PRESETS["70b"]
    share = modelmath.resident_weight_bytes(modelmath.shape_of(seventy), 2, tp=2)
    # 69.5 B sharded params / 2 + 1.05 B embedding + norms, in bf16
    assert share == pytest.approx(71.6e9, rel=0.01)
    assert driver.fewest_gpus("70b", 143_771 * 2**20, 8) == 2  # H200: 71.6 GB <= 80% of 150.8
    assert driver.fewest_gpus("70b", 81_920 * 2**20, 8) == 4  # H100: 71.6 GB > 80% of 85.9
    assert driver.fewest_gpus("70b", 40_960 * 2**20, 8) == 8  # A100 40 GB
    assert driver.fewest_gpus("8b", 81_920 * 2**20, 8) == 1


def test_the_plan_shares_a_p5_node_between_four_processes() -> None:
    result = CliRunner().invoke(app, ["bench", "inference", "--model", "70b", "--instance-type",
                                      "p5.48xlarge", "--dry-run", "--run-dir", "/x"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "#SBATCH --ntasks-per-node=4" in out and "#SBATCH --gpus-per-node=4" in out
    assert " --tensor-parallel 4 " in out and "4 processes per node sharing the model" in out
    # the replicas in the cost figure: 8 GPUs of the instance, 4 per replica
    job = driver.plan(mode="offline", model="70b", nodes=1, prompt_lens=None, batch_sizes=None,
                      context=None, decode_tokens=None, samples=0, output_len=None,
                      partition=None, instance_type="p5.48xlarge", gpus_per_node=None,
                      device="auto", mem_bw_tbps=None, peak_tflops=None, time_limit=None,
                      run_dir=Path("/x"))
    assert (job.tensor_parallel, job.gpus_per_node, job.gpus_of_instance) == (4, 4, 8)


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "tiny", "--tp", "3"], "--tensor-parallel 3: 3 ranks do not divide the "
     "shape's 4 query heads of tiny"),
    (["--model", "tiny", "--tp", "2", "--gpus-per-node", "1"],
     "--tensor-parallel 2 needs 2 GPUs per node, not 1"),
    (["--model", "70b", "--instance-type", "g5.12xlarge", "--tp", "8"],
     "--tensor-parallel 8: the instance type has 4 GPUs"),
    (["--mode", "serve", "--tp", "2"], "--tensor-parallel: offline-mode option(s)"),
])
def test_bad_sizes_are_one_line_and_exit_2(argv: list[str], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "inference", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.twin
def test_two_processes_share_one_twin_nodes_model(twin, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    argv = ["bench", "inference", "--model", "tiny", "--partition", "cpu", "--gpus-per-node",
            "0", "--decode-tokens", "8", "--tensor-parallel", "2", "--samples", "2",
            "--output-len", "8", "--instance-type", "c5.4xlarge", "--run-dir",
            str(tmp_path / "run"), "--no-store", "--timeout", "240", "--json"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    rec = json.loads(result.stdout)
    assert rec["params"]["tensor_parallel"] == 2 and rec["params"]["nodes_measured"] == 1
    assert len(rec["metrics"]["nodes"]) == 1  # the node's second process writes no part
    for row in rec["metrics"]["decode"]:
        # the node's cache, both processes' halves: as one process holds it (test_driver)
        assert row["kv_cache_bytes"] == 2 * 2 * row["batch"] * 2 * 74 * 16 * 4
        assert row["tokens_per_s"] > 0
    assert "cpu x 2 (tensor parallel)" in dict(driver.summary_rows(rec))["model"]
    log = next((tmp_path / "run").glob("slurm-*.out")).read_text()
    assert log.count("tensor parallel 2: measuring") == 2, log
    script = (tmp_path / "run" / "inference.sbatch").read_text()
    assert "#SBATCH --ntasks-per-node=2" in script
