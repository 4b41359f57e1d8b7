"""--workload sft: packing several chat samples into one row, with per-document masks and
positions, computes the loss and gradients of running the samples one by one; the sharded
run reproduces that reference; bad input files end in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from benchmarks.fsdp import sft
from benchmarks.fsdp.model import Transformer, preset
from benchmarks.fsdp.optim import OptimConfig, build_optimizer
from tests.fsdp.fsdp_launch import run_ranks

SEQ, BATCH = 1024, 4


def tiny() -> Transformer:
    torch.manual_seed(0)
    return Transformer(preset("tiny"))


def one_by_one(model: Transformer, samples: list[sft.Sample]) -> torch.Tensor:
    """Each sample alone, unpadded, plain causal attention; token-mean over all samples."""
    total = sum(s.loss_tokens for s in samples)
    loss = torch.zeros(())
    for s in samples:
        tok = torch.tensor(s.tokens)
        targets = torch.where(torch.tensor(s.trained[1:]), tok[1:], sft.IGNORE)
        logits = model(tok[None, :-1])
        loss = loss + F.cross_entropy(logits[0].float(), targets, ignore_index=sft.IGNORE,
                                      reduction="sum")
    return loss / total


def step_samples(data: sft.PackedBatches, step: int) -> list[sft.Sample]:
    rows = data.row_ids(step, range(data.batch_size))
    return [data.samples[i] for r in rows for i in data.row_docs[r]]


def test_packing_changes_neither_loss_nor_gradients() -> None:
    data = sft.PackedBatches(sft.DEFAULT_DATA, BATCH, SEQ, rank=0, world_size=1)
    inputs, targets, extras = data.local_batch(1, torch.device("cpu"))
    samples = step_samples(data, 1)
    assert len(samples) > BATCH  # rows really hold several documents
    assert (targets != sft.IGNORE).sum() == sum(s.loss_tokens for s in samples)

    packed_model, ref_model = tiny(), tiny()
    packed = sft.packed_loss(packed_model(inputs, extras["positions"], extras["mask"]),
                             targets, extras)
    packed.backward()
    reference = one_by_one(ref_model, samples)
    reference.backward()
    torch.testing.assert_close(packed, reference, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(packed_model.named_parameters(), ref_model.parameters(),
                            strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)

    # the mask and positions are what make it equal: plain causal attention over the row
    # lets documents see each other and gives other gradients
    leaky_model = tiny()
    sft.packed_loss(leaky_model(inputs), targets, extras).backward()
    with pytest.raises(AssertionError):
        torch.testing.assert_close(leaky_model.layers["0"].attention.wk.weight.grad,
                                   ref_model.layers["0"].attention.wk.weight.grad,
                                   rtol=1e-4, atol=1e-6)


def test_padding_fractions_and_prompt_masking() -> None:
    packed = sft.PackedBatches(sft.DEFAULT_DATA, BATCH, 1024, rank=0, world_size=1)
    unpacked = sft.PackedBatches(sft.DEFAULT_DATA, BATCH, 1024, rank=0, world_size=1,
                                 packed=False)
    pad = packed.padding()
    assert pad == unpacked.padding()
    assert pad["rows_unpacked"] == 400 and pad["rows_packed"] < 400
    assert 0 <= pad["padding_fraction_packed"] < 0.1 < 0.5 < pad["padding_fraction_unpacked"]
    real = sum(s.positions for s in packed.samples)
    assert pad["padding_fraction_unpacked"] == pytest.approx(1 - real / (400 * 1024))
    # the user turn is never a target; the assistant's content and EOS are
    sample = sft.tokenize([{"role": "user", "content": "hi"},
                           {"role": "assistant", "content": "yo"}], 100)
    trained = [t for t, keep in zip(sample.tokens, sample.trained, strict=True) if keep]
    assert trained == [*sft.encode("yo"), sft.EOS]


def test_shipped_file_is_what_the_generator_writes(tmp_path: Path) -> None:
    from benchmarks.fsdp import sft_synth

    assert sft_synth.main(["--out", str(tmp_path / "chat.jsonl")]) == 0
    assert (tmp_path / "chat.jsonl").read_bytes() == sft.DEFAULT_DATA.read_bytes()
    assert sft.DEFAULT_DATA.stat().st_size < 400_000


def reference_losses(steps: int) -> list[float]:
    """The plain loop on one process: each step's samples one by one."""
    model = tiny()
    optimizer, scheduler = build_optimizer(model, OptimConfig(), steps)
    data = sft.PackedBatches(sft.DEFAULT_DATA, BATCH, SEQ, rank=0, world_size=1)
    losses = []
    for step in range(1, steps + 1):
        loss = one_by_one(model, step_samples(data, step))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), OptimConfig().max_grad_norm)
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        losses.append(loss.item())
    return losses


def test_two_ranks_packed_match_one_process_sample_by_sample(tmp_path: Path) -> None:
    run = run_ranks(2, ["--model", "tiny", "--workload", "sft", "--batch-size", str(BATCH),
                        "--seq-len", str(SEQ), "--steps", "3", "--timing-warmup", "1"],
                    tmp_path / "record.json")
    assert run.returncodes == [0, 0], run.output
    rec = run.record
    assert rec is not None and rec["params"]["workload"] == "sft"
    # step 1 checks the loss; steps 2 and 3 the gradients that moved the weights
    torch.testing.assert_close([run.losses()[s] for s in (1, 2, 3)], reference_losses(3),
                               rtol=1e-5, atol=1e-5)
    w = rec["metrics"]["sft"]
    assert w["packed"] and w["padding_fraction_packed"] < w["padding_fraction_unpacked"]
    assert w["real_tokens_per_s_per_gpu"] > 0
    # the headline counts real tokens; the row slots (padding included) are kept beside it
    m = rec["metrics"]
    assert m["tokens_per_s_per_gpu"] == w["real_tokens_per_s_per_gpu"]
    assert m["slot_tokens_per_s_per_gpu"] > m["tokens_per_s_per_gpu"]
    assert 0 <= w["padding_fraction_measured"] < 1
    assert "block-diagonal" in w["attention"]


@pytest.mark.parametrize(("content", "message"), [
    ("{not json\n", "chat.jsonl:1: not JSON"),
    (json.dumps({"messages": [{"role": "user", "content": "x"}]}) + "\n",
     "chat.jsonl:1: no assistant message"),
    ("\n", "chat.jsonl: no conversations"),
])
def test_bad_chat_file_is_one_line_and_exit_2(tmp_path: Path, content: str,
                                              message: str) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(content)
    run = run_ranks(1, ["--workload", "sft", "--data", str(path), "--steps", "1"], None)
    assert run.returncodes == [2], run.output
    assert message in run.output and "Traceback" not in run.output


def test_no_pack_puts_one_sample_per_row(tmp_path: Path) -> None:
    run = run_ranks(1, ["--workload", "sft", "--no-pack", "--batch-size", "4", "--steps", "3",
                        "--timing-warmup", "1"], tmp_path / "record.json")
    assert run.returncodes == [0], run.output
    assert run.record is not None
    w = run.record["metrics"]["sft"]
    assert not w["packed"] and run.record["params"]["data"]["rows"] == 400
    # one sample per 1024-token row: most of each row is padding
    assert w["padding_fraction_measured"] > 0.4
