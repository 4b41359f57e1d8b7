"""Plans for published training runs reproduce the GPU-hours their authors published.

Each case gives the planner only what the source publishes (tokens, parameters, shape, GPU
model and count, MFU or the throughput MFU follows from) and compares its compute GPU-hours
with the published figure: within 15%. Published GPU-hours include time the planner models
separately (restarts, idle GPUs, evaluation), so the plan may come out a little low.
"""

from __future__ import annotations

import json

import pytest

from toolkit.cli import main
from toolkit.plan.planner import Request, make_plan

TOLERANCE = 0.15


def _plan_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main(["plan", *argv, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_llama_3_1_405b_on_16384_h100(capsys):
    """Llama 3.1 405B.

    - GPU-hours: 30.84M H100-80GB GPU hours for Llama 3.1 405B ("Training Time (GPU hours)",
      Llama 3.1 model card, https://github.com/meta-llama/llama-models/blob/main/models/
      llama3_1/MODEL_CARD.md; 1.46M for 8B, 7.0M for 70B, 39.3M in all).
    - Tokens 15.6T, 405B parameters, 126 layers, width 16,384, 128 attention heads (Table 3),
      sequence 8,192 on 16,384 H100s at 41% BF16 MFU, 400 TFLOPs/GPU (Table 4: 43% on 8,192
      GPUs, 41% on 16,384, 38% on 16,384 with 131,072-token context parallelism): Llama Team,
      "The Llama 3 Herd of Models", arXiv 2407.21783.
    The paper names 3.8e25 FLOPs (6 x 405e9 x 15.6e12 = 3.79e25): 6N alone. With the
    attention term, 12 x 126 x 128 x 128 x 8192 = 2.03e11 FLOPs per token on top of
    6N = 2.43e12, the plan is 28.1M GPU-hours, 8.8% under the published 30.84M; 6N alone
    would be 26.0M, 15.8% under: the attention term is what brings it within 15%.
    """
    published = 30.84e6
    plan = _plan_cli(capsys, "--params", "405e9", "--layers", "126", "--dim", "16384",
                     "--heads", "128", "--seq-len", "8192", "--tokens", "15.6T",
                     "--gpu", "H100", "--gpus", "16384", "--mfu", "0.41")
    assert plan["gpus"] == 16384 and plan["nodes"] == 2048 and plan["gpu_model"] == "H100"
    assert plan["flops"] == pytest.approx(4.107e25, rel=1e-3)
    assert abs(plan["gpu_hours"] / published - 1) <= TOLERANCE
    assert plan["gpu_hours"] == pytest.approx(28.14e6, rel=1e-3)
    six_n = make_plan(Request(params=405e9, seq_len=8192, tokens=15.6e12, gpu="H100",
                              gpus=16384, mfu=0.41))
    assert six_n["flops"] == pytest.approx(3.79e25, rel=1e-3)  # the paper's 3.8e25


def test_llama_65b_on_2048_a100(capsys):
    """LLaMA-65B.

    Touvron et al., "LLaMA: Open and Efficient Foundation Language Models", arXiv 2302.13971:
    65.2B parameters, 80 layers, width 8,192, 64 heads, 1.4T tokens, 2,048-token sequences
    (Table 2); "when training a 65B-parameter model, our code processes around 380
    tokens/sec/GPU on 2048 A100 GPU with 80GB of RAM. This means that training over our
    dataset containing 1.4T tokens takes approximately 21 days" (section 2.4); 1,022,362
    GPU-hours for LLaMA-65B (Table 15).

    The paper publishes no MFU, so it is derived here from the published throughput and
    nothing else: MFU = 380 tokens/s x FLOPs per token / 312e12 (A100 dense bf16 peak). This
    checks the planner's plumbing (FLOPs cancel out: the GPU-hours are 1.4e12 / 380 / 3600
    = 1,023,392), the GPU-hours and the days against two published figures.
    """
    fpt = 6 * 65.2e9 + 12 * 80 * 8192 * 2048  # 6N (N as published) + attention
    mfu = 380 * fpt / 312e12  # 0.496
    plan = _plan_cli(capsys, "--params", "65.2e9", "--layers", "80", "--dim", "8192",
                     "--heads", "64", "--seq-len", "2048", "--tokens", "1.4T",
                     "--gpu", "A100-80GB", "--gpus", "2048", "--mfu", repr(mfu))
    assert plan["flops_per_token"] == fpt
    assert plan["instance_type"] == "p4de.24xlarge" and plan["nodes"] == 256
    assert abs(plan["gpu_hours"] / 1_022_362 - 1) <= TOLERANCE
    assert plan["gpu_hours"] == pytest.approx(1.4e12 / 380 / 3600)
    assert abs(plan["compute_days"] / 21 - 1) <= TOLERANCE  # "approximately 21 days"


# GPT-3 175B and the 1T model of Narayanan et al., "Efficient Large-Scale Language Model
# Training on GPU Clusters Using Megatron-LM" (SC21, arXiv 2104.04473): Table 1's shapes
# (sequence 2,048, vocabulary 51,200), its parameter count P = 12lh^2(1 + 13/(12h) +
# (V + s)/(12lh)) and its FLOPs per iteration F = 96Bslh^2(1 + s/(6h) + V/(16lh)), which
# counts activation recomputation (a second forward of every layer, not of the logits).
MEGATRON = {  # name: (layers, width, heads, GPUs, TFLOP/s per GPU, tokens, published days)
    "gpt3-175b": (96, 12288, 96, 1024, 140e12, "300B", 34),
    "1t": (128, 25600, 160, 3072, 163e12, "450B", 84),
}
SEQ, VOCAB = 2048, 51200


@pytest.mark.parametrize("name", sorted(MEGATRON))
def test_megatron_lm_runs_flops_and_days(capsys, name: str) -> None:
    """The paper's two training-time estimates (section 5.1: GPT-3 175B on 1,024 A100s at
    140 TFLOP/s per GPU, 300B tokens, 34 days; 1T on 3,072 A100s at 163 TFLOP/s, 450B
    tokens, 84 days), both from its approximation 8TP/(nX).

    Conventions, and each tolerance, fixed before the computation:
    - FLOPs per token: the planner's 6N + attention (no recomputation) against the paper's
      formula without its recomputed forward, 72lh^2(1 + s/(6h)) + 6hV per token. The two
      count the same matmuls; 6N adds the position embeddings and the layers' biases and
      norms (6hs + 78lh), so they agree within 0.1%.
    - Days: the MFU the planner takes is the paper's throughput in its own accounting
      converted to the planner's (X x planner FLOPs / paper FLOPs with recomputation, over
      the A100's 312 TFLOP/s). The days then differ from the published ones by the paper's
      8TP/(nX) approximation alone (it drops s/(6h) and V/(16lh)): within 3%.
    """
    layers, h, heads, gpus, x, tokens, days = MEGATRON[name]
    params = 12 * layers * h**2 * (1 + 13 / (12 * h) + (VOCAB + SEQ) / (12 * layers * h))
    paper_no_recompute = 72 * layers * h**2 * (1 + SEQ / (6 * h)) + 6 * h * VOCAB
    paper_recompute = 96 * layers * h**2 * (1 + SEQ / (6 * h) + VOCAB / (16 * layers * h))
    args = ["--params", repr(params), "--layers", str(layers), "--dim", str(h), "--heads",
            str(heads), "--seq-len", str(SEQ), "--tokens", tokens, "--gpu", "A100-80GB",
            "--gpus", str(gpus)]
    fpt = _plan_cli(capsys, *args, "--mfu", "0.4")["flops_per_token"]
    assert abs(fpt / paper_no_recompute - 1) <= 0.001, (fpt, paper_no_recompute)
    mfu = x * fpt / paper_recompute / 312e12
    plan = _plan_cli(capsys, *args, "--mfu", repr(mfu))
    assert plan["gpus"] == gpus
    assert abs(plan["compute_days"] / days - 1) <= 0.03, (plan["compute_days"], days)
