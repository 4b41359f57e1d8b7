"""The settings a run gets when its command line leaves them out: on GPUs from the model
shape and the GPU memory (the planner's memory model), on CPUs the small demo settings; an
explicit flag always wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from benchmarks.fsdp.config import parse_config, preset
from benchmarks.fsdp.defaults import TOKENS_PER_GPU, gpu_defaults
from benchmarks.fsdp.train import resolve_defaults
from benchmarks.modelmath import GIB, memory, shape_of
from tests.fsdp.fsdp_launch import run_ranks
from toolkit.cli import app

H100 = 80 * GIB  # what torch reports is a little less; the choice is the same
H200 = 141 * GIB
A10G = 22 * GIB


@pytest.mark.parametrize(("model", "gpu_bytes", "shard", "expected"), [
    # the 1B shape on one 80 GiB GPU: 4 x 4096 fits without AC (~57 GiB of 72 usable)
    ("1b", H100, 1, (4096, 4, True, False, True)),
    ("1b", H200, 1, (4096, 4, True, False, True)),  # capped at 16k tokens, not memory
    # 8B over 8 GPUs: 4 sequences do not fit without AC, 2 do
    ("8b", H100, 8, (4096, 2, True, False, True)),
    # 70B over 64 GPUs: not one sequence fits without AC; with AC the full 16k tokens do
    ("70b", H100, 64, (4096, 4, True, True, True)),
    # 8B on one GPU cannot fit at all: the most frugal settings, marked as not fitting
    ("8b", H100, 1, (4096, 1, True, True, False)),
    ("1b", A10G, 1, (4096, 1, True, True, False)),
    # a short-context shape: the sequence is capped by the model, the batch fills 16k tokens
    ("tiny", H100, 1, (1024, 16, True, False, True)),
])
def test_gpu_defaults_per_shape_and_memory(model: str, gpu_bytes: int, shard: int,
                                           expected: tuple) -> None:
    c = gpu_defaults(preset(model), gpu_bytes, shard, "GPU")
    assert (c.seq_len, c.batch_per_gpu, c.compile, c.ac, c.fits) == expected
    assert c.chosen == ("seq_len", "batch_per_gpu", "compile", "ac")
    # the choice is the memory model's: what was picked fits, twice the batch would not
    need = memory(shape_of(preset(model)), shard, c.seq_len, c.batch_per_gpu).total(c.ac)
    assert (need <= gpu_bytes * 0.9) == c.fits
    if c.fits and c.batch_per_gpu * c.seq_len < TOKENS_PER_GPU:
        bigger = memory(shape_of(preset(model)), shard, c.seq_len, 2 * c.batch_per_gpu)
        assert bigger.total(c.ac) > gpu_bytes * 0.9


def test_the_summary_states_the_choice_and_the_reason() -> None:
    c = gpu_defaults(preset("1b"), H100, 1, "H100 80 GiB")
    line = c.summary()
    assert line.startswith("defaults chosen for H100 80 GiB: seq 4096, batch 4, compile on, "
                           "AC off (")
    assert "fits without" in line and "GiB usable" in line
    assert not gpu_defaults(preset("8b"), H100, 1, "H100").fits
    assert "does NOT fit" in gpu_defaults(preset("8b"), H100, 1, "H100").summary()
    record = c.to_dict()
    assert record["chosen"] == ["seq_len", "batch_per_gpu", "compile", "ac"]
    assert record["memory_model"].startswith("benchmarks.modelmath")


def test_explicit_settings_win_and_the_rest_is_chosen_around_them() -> None:
    # seq 8192 given: the batch halves to stay within 16k tokens and the memory
    c = gpu_defaults(preset("1b"), H100, 1, "H100", seq_len=8192)
    assert (c.seq_len, c.batch_per_gpu, c.compile, c.ac) == (8192, 2, True, False)
    assert c.chosen == ("batch_per_gpu", "compile", "ac")
    # compile off and AC on given: kept as they are, even where the choice would differ
    c = gpu_defaults(preset("1b"), H100, 1, "H100", compile=False, ac=True)
    assert (c.compile, c.ac, c.batch_per_gpu) == (False, True, 4)
    assert "given: compile off, AC on" in c.summary()
    # a batch that does not fit without AC: AC is switched on for it rather than shrinking it
    c = gpu_defaults(preset("1b"), H100, 1, "H100", batch_per_gpu=8)
    assert (c.batch_per_gpu, c.ac, c.fits) == (8, True, True)
    # everything given: nothing chosen
    c = gpu_defaults(preset("1b"), H100, 1, "H100", seq_len=2048, batch_per_gpu=1,
                     compile=False, ac=False)
    assert c.chosen == () and c.summary().startswith("no defaults chosen for H100")


def test_the_memory_model_the_defaults_use_for_8b_over_eight_gpus() -> None:
    # 8B (8,030,261,248 parameters, tests/plan/test_arithmetic.py) over 8 GPUs, 2 x 4096
    # tokens: fp32 parameters and gradients 4 * P / 8 = 4,015,130,624 each, AdamW 8 * P / 8 =
    # 8,030,261,248; two bf16 blocks and one fp32 block gradient 218,112,000 * 8 =
    # 1,744,896,000; the root group 1,050,677,248 * 4 = 4,202,708,992; activations depend on
    # the 8,192 tokens alone, as for 1 x 8192: 50,327,453,696 -> 72,335,581,184 bytes
    mem = memory(shape_of(preset("8b")), 8, 4096, 2)
    assert (mem.parameters, mem.gradients, mem.optimizer) == \
        (4_015_130_624, 4_015_130_624, 8_030_261_248)
    assert (mem.gathered, mem.root, mem.activations) == \
        (1_744_896_000, 4_202_708_992, 50_327_453_696)
    assert mem.total(False) == 72_335_581_184
    with pytest.raises(ValueError, match="shard size must be at least 1"):
        memory(shape_of(preset("8b")), 0, 4096, 2)


def test_cpu_defaults_stay_small_and_flags_win() -> None:
    cpu = torch.device("cpu")
    cfg, choice = resolve_defaults(parse_config(["--model", "1b"]), 1, 1, cpu)
    assert choice is None
    assert (cfg.seq_len, cfg.batch_size, cfg.compile, cfg.ac) == (64, 8, False, False)
    cfg, _ = resolve_defaults(parse_config(["--model", "tiny"]), 3, 3, cpu)
    assert cfg.batch_size == 3  # 8 does not split over 3 ranks: one sequence each
    cfg, _ = resolve_defaults(parse_config(["--seq-len", "32", "--batch-size", "4", "--ac",
                                            "--compile"]), 1, 1, cpu)
    assert (cfg.seq_len, cfg.batch_size, cfg.compile, cfg.ac) == (32, 4, True, True)
    assert parse_config(["--no-compile", "--no-ac"]).compile is False


def test_a_cpu_run_records_the_unchanged_demo_settings(tmp_path: Path) -> None:
    run = run_ranks(1, ["--model", "tiny", "--steps", "2", "--timing-warmup", "1"],
                    tmp_path / "record.json")
    assert run.returncodes == [0], run.output
    p = run.record["params"]  # type: ignore[index]
    assert (p["seq_len"], p["global_batch_size"], p["compile"],
            p["activation_checkpointing"], p["defaults"]) == (64, 8, False, False, None)
    assert (p["loss"], p["optimizer_kernels"], p["matmul_dtype"]) == ("eager", "foreach",
                                                                       "float32")


def test_fp8_on_a_cpu_is_refused_in_one_line(tmp_path: Path) -> None:
    run = run_ranks(1, ["--model", "tiny", "--steps", "2", "--fp8"], tmp_path / "r.json")
    assert run.returncodes == [2]
    lines = [x for x in run.output.splitlines() if x.strip()]
    assert lines == ["error: --fp8 needs an NVIDIA GPU of compute capability 8.9 or newer "
                     "(sm89+: Ada, Hopper, Blackwell); this run is on cpu"], run.output
    assert not (tmp_path / "r.json").exists()


def test_the_driver_leaves_gpu_settings_to_the_node_and_states_the_expectation() -> None:
    result = CliRunner().invoke(app, ["bench", "fsdp", "--instance-type", "p5.48xlarge",
                                      "--model", "1b", "--dry-run", "--run-dir", "/x"])
    assert result.exit_code == 0, result.output
    srun = next(x for x in result.output.splitlines() if x.startswith("srun"))
    assert "--seq-len" not in srun and "--batch-size" not in srun and "compile" not in srun
    assert ("# expected from the catalog: defaults chosen for H100 80 GiB: seq 4096, batch 4, "
            "compile on, AC off") in result.output
    # flags given on the command line reach the node as they are
    result = CliRunner().invoke(app, ["bench", "fsdp", "--model", "8b", "--seq-len", "8192",
                                      "--batch-per-gpu", "1", "--no-compile", "--ac",
                                      "--dry-run", "--run-dir", "/x"])
    assert result.exit_code == 0, result.output
    srun = next(x for x in result.output.splitlines() if x.startswith("srun"))
    assert "--batch-size 8 --seq-len 8192" in srun and "--ac --no-compile" in srun
    assert "# settings left out" not in result.output
    json.dumps(result.output)
