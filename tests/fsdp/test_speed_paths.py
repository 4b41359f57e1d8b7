"""The speed changes of the FSDP step, checked for correctness on the CPU (their speed is
measured by benchmarks/gpu_check.py on a GPU): the compiled loss computes what the eager one
does, a one-GPU shard group keeps its gathered blocks and still trains like an unsharded
process, AdamW picks its kernels by device, fp8 converts exactly the blocks' linears."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from torch import nn

from benchmarks.fsdp.model import Transformer, preset
from benchmarks.fsdp.optim import implementation
from benchmarks.fsdp.parallelize import reshard_after_forward
from benchmarks.fsdp.train import cross_entropy, loss_function
from benchmarks.reference.torchtitan_peer import parse_log
from tests.fsdp.fsdp_launch import TINY, run_ranks, unsharded_reference


def test_the_compiled_loss_matches_the_eager_one_and_its_gradient() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 16, 512, dtype=torch.bfloat16, requires_grad=True)
    targets = torch.randint(0, 512, (2, 16))
    eager = cross_entropy(logits, targets)
    (g_eager,) = torch.autograd.grad(eager, logits)
    compiled = loss_function(compiled=True)(logits, targets)
    (g_compiled,) = torch.autograd.grad(compiled, logits)
    assert compiled.dtype == torch.float32
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_compiled.float(), g_eager.float(), rtol=1e-2, atol=1e-4)
    assert loss_function(compiled=False) is cross_entropy


def test_a_one_gpu_shard_group_keeps_gathered_blocks_others_reshard() -> None:
    assert [reshard_after_forward(i, 4, shard=1) for i in range(4)] == [False] * 4
    assert [reshard_after_forward(i, 4, shard=8) for i in range(4)] == [True, True, True, False]


def test_world_size_one_trains_like_one_unsharded_process(tmp_path: Path) -> None:
    run = run_ranks(1, [*TINY, "--steps", "3"], tmp_path / "record.json")
    assert run.returncodes == [0], run.output
    ref_losses, _ = unsharded_reference(3)
    torch.testing.assert_close([run.losses()[s] for s in (1, 2, 3)], ref_losses,
                               rtol=1e-5, atol=1e-5)


def test_adamw_kernels_follow_the_device() -> None:
    assert implementation(nn.Linear(4, 4)) == {"foreach": True}


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None, reason="torchao not installed")
def test_fp8_converts_the_blocks_linears_only() -> None:
    from benchmarks.fsdp import fp8

    model = Transformer(preset("tiny"))
    assert fp8.convert(model) == 2 * 7  # wq wk wv wo w1 w2 w3 in each of 2 blocks
    assert type(model.output) is nn.Linear  # the vocabulary projection stays bf16
    assert all(type(m) is not nn.Linear for m in model.layers.modules())
    assert fp8.unavailable(torch.device("cpu")).startswith("--fp8 needs an NVIDIA GPU")


def test_torchtitan_log_lines_are_read() -> None:
    red, reset = "\x1b[31m", "\x1b[39m"
    lines = [f"{red}step: {s:2}  loss: 10.12345  grad_norm:  1.2345  memory: 41.25GiB(29.50%)  "
             f"tps: {tps:,}  tflops: 456.78  mfu: 46.19%{reset}"
             for s, tps in ((1, 1000), (2, 48000), (3, 50000), (4, 52000))]
    m = parse_log("\n".join(["[titan] starting", *lines]), warmup=1)
    assert m["measured_steps"] == 3 and m["tokens_per_s_per_gpu"] == 50000
    assert m["mfu"] == pytest.approx(0.4619) and m["peak_memory_reserved_gib"] == 41.25
    assert parse_log("no steps here", 1)["measured_steps"] == 0
