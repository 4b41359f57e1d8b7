"""--workload rl: KV-cache decoding computes what the full forward computes, advantages are
group-relative, and the GRPO loop on 2 FSDP ranks really learns a reward that prefers one
token."""

from __future__ import annotations

from pathlib import Path

import torch

from benchmarks.fsdp import decode, rl
from benchmarks.fsdp.model import Transformer, preset
from tests.fsdp.fsdp_launch import run_ranks


def test_cached_decoding_matches_the_full_forward() -> None:
    torch.manual_seed(0)
    model = Transformer(preset("tiny")).eval()
    tokens = torch.randint(512, (3, 12))
    full = model(tokens)
    cache = decode.KVCache.empty(model, 3, 12, torch.float32, torch.device("cpu"))
    parts = [decode.forward_cached(model, tokens[:, :5], cache)]  # prefill
    parts += [decode.forward_cached(model, tokens[:, t:t + 1], cache) for t in range(5, 9)]
    parts.append(decode.forward_cached(model, tokens[:, 9:], cache))  # a chunk after the cache
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-4, atol=1e-5)
    assert cache.length == 12

    # sampling is seeded: the same generator gives the same tokens
    prompts = tokens[:, :4]
    a = decode.generate(model, prompts, 6, torch.Generator().manual_seed(1))
    b = decode.generate(model, prompts, 6, torch.Generator().manual_seed(1))
    assert a.shape == (3, 6) and torch.equal(a, b)


def test_rewards_and_group_relative_advantages() -> None:
    completions = torch.tensor([[7, 7, 1, 2], [1, 2, 3, 4], [7, 7, 7, 7], [7, 1, 1, 1]])
    reward = rl.rewards(completions, 7)
    assert reward.tolist() == [0.5, 0.0, 1.0, 0.25]
    adv = rl.group_advantages(reward, 2)
    assert adv[0] > 0 > adv[1] and adv[2] > 0 > adv[3]
    torch.testing.assert_close(adv.view(2, 2).sum(dim=1), torch.zeros(2), atol=1e-6, rtol=0)
    # a group whose samples all score the same teaches nothing
    assert rl.group_advantages(torch.tensor([0.3, 0.3]), 2).abs().max() == 0


def test_two_ranks_learn_to_prefer_the_rewarded_token(tmp_path: Path) -> None:
    run = run_ranks(2, ["--model", "tiny", "--workload", "rl", "--steps", "10",
                        "--batch-size", "4", "--rl-group", "16", "--rl-new-tokens", "32",
                        "--rl-target-token", "7", "--lr", "2e-2", "--warmup-steps", "0",
                        "--schedule", "constant", "--timing-warmup", "2"],
                    tmp_path / "record.json")
    assert run.returncodes == [0, 0], run.output
    rec = run.record
    assert rec is not None and rec["verdict"]["status"] == "PASS", run.output
    assert rec["params"]["workload"] == "rl" and rec["params"]["world_size"] == 2
    w = rec["metrics"]["rl"]
    prob = [p for _, p in w["target_prob"]]
    reward = [r for _, r in w["rewards"]]
    # from chance (1/512) to most of the mass within ten iterations
    assert prob[0] < 0.01 and prob[-1] > 0.5, prob
    assert reward[-1] > 0.5 > 0.05 > reward[0], reward
    assert [it["step"] for it in w["iterations"]] == list(range(1, 11))
    assert set(w["phase_fraction"]) == set(rl.PHASES)
    assert abs(sum(w["phase_fraction"].values()) - 1) < 1e-9
    assert w["bound_by"] in rl.PHASES and w["measured_iterations"] == 8
    assert w["generation_tokens_per_s_per_gpu"] > 0 and w["training_tokens_per_s_per_gpu"] > 0
    assert w["weight_sync_bytes"] > 4 * 180_000  # the full fp32 weights reach the rollout copy


def test_target_token_outside_the_vocabulary_is_one_line_and_exit_2() -> None:
    run = run_ranks(1, ["--workload", "rl", "--rl-target-token", "512", "--steps", "1"], None)
    assert run.returncodes == [2], run.output
    assert "--rl-target-token 512 is outside the tiny vocabulary (0..511)" in run.output
    assert "Traceback" not in run.output
