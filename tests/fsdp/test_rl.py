"""--workload rl: KV-cache decoding computes what the full forward computes, advantages are
group-relative, the clip engages only with several updates per rollout, the GRPO loop on 2
FSDP ranks really learns a reward that prefers one token and, with its defaults, its reward
band, and a run whose reward does not rise says so in its verdict."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from benchmarks.fsdp import decode, rl
from benchmarks.fsdp.model import Transformer, preset
from benchmarks.fsdp.optim import OptimConfig, build_optimizer
from tests.fsdp.fsdp_launch import run_ranks
from toolkit.bench.fsdp.driver import summary_rows


def test_cached_sampling_draws_what_the_full_forward_would() -> None:
    """decode.generate (a prefill, then one cached step a token) against sampling each token
    from the full forward over everything so far, with the same seeded generator."""
    torch.manual_seed(0)
    model = Transformer(preset("tiny")).eval()
    prompts = torch.randint(512, (3, 4))
    got = decode.generate(model, prompts, 6, torch.Generator().manual_seed(1))
    gen, seq = torch.Generator().manual_seed(1), prompts
    with torch.no_grad():
        for _ in range(6):
            probs = torch.softmax(model(seq)[:, -1].float(), dim=-1)
            seq = torch.cat([seq, torch.multinomial(probs, 1, generator=gen)], dim=1)
    assert got.shape == (3, 6)
    assert torch.equal(got, seq[:, 4:])


def test_rewards_and_group_relative_advantages() -> None:
    completions = torch.tensor([[7, 7, 1, 2], [1, 2, 3, 4], [7, 7, 7, 7], [7, 1, 1, 1]])
    reward = rl.rewards(completions, 7)
    assert reward.tolist() == [0.5, 0.0, 1.0, 0.25]
    # a band of ids: 7, 8, 9 count, 1..4 do not
    assert rl.rewards(torch.tensor([[7, 9, 10, 1], [6, 8, 8, 8]]), 7, 3).tolist() == [0.5, 0.75]
    adv = rl.group_advantages(reward, 2)
    assert adv[0] > 0 > adv[1] and adv[2] > 0 > adv[3]
    torch.testing.assert_close(adv.view(2, 2).sum(dim=1), torch.zeros(2), atol=1e-6, rtol=0)
    # a group whose samples all score the same teaches nothing
    assert rl.group_advantages(torch.tensor([0.3, 0.3]), 2).abs().max() == 0


def test_two_ranks_learn_to_prefer_the_rewarded_token(tmp_path: Path) -> None:
    run = run_ranks(2, ["--model", "tiny", "--workload", "rl", "--steps", "10",
                        "--batch-size", "4", "--rl-group", "16", "--rl-new-tokens", "32",
                        "--rl-target-token", "7", "--rl-target-width", "1",
                        "--rl-updates", "1", "--lr", "2e-2", "--warmup-steps", "0",
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


def test_clip_engages_only_with_several_updates_per_rollout() -> None:
    # the loss function itself: a ratio of 1.5 is held back where the advantage pushes it up,
    # not where it pushes it down (the unclipped term is the smaller one there)
    old = torch.zeros(2, 3)
    new = torch.full((2, 3), float(torch.log(torch.tensor(1.5))))
    _loss, held = rl.policy_loss(new, old, torch.tensor([1.0, -1.0]))
    assert held.item() == 0.5
    _loss, held = rl.policy_loss(old, old, torch.tensor([1.0, -1.0]))
    assert held.item() == 0

    # the benchmark's update loop on a real tiny model and its own rollouts
    def clipped(updates: int) -> list[float]:
        torch.manual_seed(0)
        model = Transformer(preset("tiny"))
        prompts = torch.randint(512, (4, 16), generator=torch.Generator().manual_seed(1))
        prompts = prompts.repeat_interleave(8, 0)
        with torch.no_grad():
            new_tokens = decode.generate(model.eval(), prompts, 16,
                                         torch.Generator().manual_seed(2))
        model.train()
        reward = rl.rewards(new_tokens, 7, 32)
        optimizer, scheduler = build_optimizer(model, OptimConfig(lr=2e-2), 4)
        done = rl.update_policy(model, optimizer, scheduler, torch.cat([prompts, new_tokens], 1),
                                16, rl.group_advantages(reward, 8), updates, 1.0,
                                range(7, 39), time.perf_counter)
        assert 0.03 < done.rewarded_mass < 0.1  # a random policy: about 1/16 on the band
        return done.clip_fractions

    assert clipped(1) == [0.0]  # one update: the ratio is exactly 1
    several = clipped(4)
    assert several[0] == 0.0 and max(several[1:]) > 0.05, several


def test_default_run_learns_its_reward(tmp_path: Path) -> None:
    run = run_ranks(2, ["--model", "tiny", "--workload", "rl"], tmp_path / "record.json")
    assert run.returncodes == [0, 0], run.output
    rec = run.record
    assert rec is not None and rec["verdict"] == {"status": "PASS", "reasons": []}, run.output
    assert rec["params"]["steps"] == 20 and rec["params"]["optimizer"]["lr"] == 2e-2
    w = rec["metrics"]["rl"]
    assert w["target_width"] == 32 and w["updates_per_iteration"] == 4 and w["group"] == 8
    reward = [r for _, r in w["rewards"]]
    prob = [p for _, p in w["target_prob"]]
    # a random policy earns about 1/16; the first and last 5 iterations 0.3 apart at least
    assert reward[0] < 0.15 and prob[0] < 0.1, reward
    learning = w["learning"]
    assert learning["moved"] is True and learning["window"] == 5
    assert learning["last"] - learning["first"] > 0.3, reward
    assert learning["first"] == sum(reward[:5]) / 5 and prob[-1] > prob[0] + 0.3
    assert learning["summary"].startswith(f"reward {learning['first']:.2f} -> ")
    assert dict(summary_rows(rec))["reward"] == learning["summary"]
    assert 0 < w["clip_fraction_mean"] < 1


def test_a_run_whose_reward_does_not_rise_is_a_warning(tmp_path: Path) -> None:
    run = run_ranks(1, ["--model", "tiny", "--workload", "rl", "--steps", "4", "--batch-size",
                        "2", "--timing-warmup", "1", "--lr", "0"], tmp_path / "record.json")
    assert run.returncodes == [0], run.output
    rec = run.record
    assert rec is not None, run.output
    learning = rec["metrics"]["rl"]["learning"]
    assert learning["moved"] is False and abs(learning["rise"]) < rl.MIN_REWARD_RISE
    assert rec["verdict"]["status"] == "WARN"
    assert rec["verdict"]["reasons"] == [learning["summary"]]
    assert learning["summary"].startswith("the reward did not rise: ")
    assert "over 4 iterations" in learning["summary"]
    assert dict(summary_rows(rec))["verdict"].startswith("WARN the reward did not rise")
    assert rec["metrics"]["rl"]["clip_fraction_mean"] == 0  # nothing moved, nothing clipped


def test_target_token_outside_the_vocabulary_is_one_line_and_exit_2() -> None:
    run = run_ranks(1, ["--workload", "rl", "--rl-target-token", "512", "--steps", "1"], None)
    assert run.returncodes == [2], run.output
    assert "--rl-target-token 512 is outside the tiny vocabulary (0..511)" in run.output
    assert "Traceback" not in run.output
    # a band of the default width that reaches past the vocabulary
    run = run_ranks(1, ["--workload", "rl", "--rl-target-token", "500", "--steps", "1"], None)
    assert run.returncodes == [2], run.output
    assert ("--rl-target-token 500 with --rl-target-width 32 reaches past the tiny "
            "vocabulary (0..511); use a target of at most 480") in run.output
    assert "Traceback" not in run.output
