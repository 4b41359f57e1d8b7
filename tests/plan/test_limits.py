"""The planner's advice stays within limits: a global batch no larger than comparable runs
used, and a plan longer than a year said out loud. Each case is the step from the figures
to the decision, checked with the planner's own figures for the neighbouring size."""

from __future__ import annotations

import pytest

from tests.plan.test_cli import _plan
from toolkit.cli import main
from toolkit.plan import limits

BOUND = 16 * 2**20  # Llama 3 405B's 16M tokens/step: 2,048 sequences of 8,192


def test_the_bound_and_the_most_nodes_within_it():
    assert limits.MAX_TOKENS_PER_STEP == BOUND
    assert "2407.21783" in limits.BATCH_SOURCE and "2005.14165" in limits.BATCH_SOURCE
    # 8 GPUs x 1 sequence x 8,192 tokens = 65,536 tokens per node: 256 nodes make 16M
    assert limits.max_nodes_for_batch(BOUND, 8, 1, 8192) == 256
    assert limits.max_nodes_for_batch(BOUND, 8, 2, 4096) == 256
    assert limits.max_nodes_for_batch(BOUND, 8, 1, 4096) == 512
    assert limits.max_nodes_for_batch(BOUND, 8, 512, 8192) == 0  # 33.5M on one node
    assert limits.tokens_text(BOUND) == "16M" and limits.tokens_text(4e6) == "4,000,000"


@pytest.mark.parametrize(("argv", "per_node"), [
    # 8b, Chinchilla tokens: main chose 8,081 p4de nodes (530M tokens per step)
    (["--budget", "500k", "--instance-type", "p4de.24xlarge"], 8),
    # main chose 7,903 p5 nodes for 0.01 days
    (["--budget", "100k"], 8),
])
def test_budget_plans_keep_the_global_batch_within_the_bound(capsys, argv, per_node):
    code, plan = _plan(capsys, *argv)
    assert code == 0
    seq = plan["inputs"]["seq_len"]["value"]
    assert seq == 8192
    assert plan["gpus"] * seq <= BOUND
    assert plan["nodes"] == 256 and plan["gpus"] == 256 * per_node
    assert plan["global_batch"]["tokens_per_step"] == BOUND
    assert plan["recommendation"]["nodes"] == 256
    budget = plan["inputs"]["budget_usd"]["value"]
    # the bound, not the budget, stopped it: one node more is affordable, and over the bound
    _, more = _plan(capsys, *argv[2:], "--nodes", "257")
    assert more["cost_usd"]["on_demand"]["usd"] <= budget
    assert [w["code"] for w in more["warnings"]] == ["batch-above-bound"]
    assert plan["recommendation"]["why"] == (
        f"the largest count whose global batch stays <= 16M tokens/step; --budget "
        f"${budget:,.0f} would pay for more")
    assert plan["warnings"] == []

    assert main(["plan", *argv]) == 0
    text = capsys.readouterr().out
    assert f"recommend 256 nodes: {plan['recommendation']['why']}\n" in text
    assert "global batch         16,777,216 tokens/step (2,048 sequences; bound 16M" in text


def test_a_budget_that_binds_first_is_said_to_bind(capsys):
    # 8b on 1T tokens on p5: $281k on 4 nodes, $287k on 64, $290k on 128 (more nodes, more
    # failures); $288k stops between 64 and 128 nodes, below the bound's 256
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--budget", "288k")
    assert code == 0 and 64 <= plan["nodes"] < 128
    assert plan["recommendation"]["why"] == "the fastest plan within --budget $288,000"
    _, more = _plan(capsys, "--model", "8b", "--tokens", "1T", "--nodes",
                    str(plan["nodes"] + 1))
    assert more["cost_usd"]["on_demand"]["usd"] > 288_000


def test_a_days_target_beyond_the_bound_is_refused_naming_it(capsys):
    # 70b on 15T tokens in 30 days needs far more than 256 p5 nodes
    code = main(["plan", "--model", "70b", "--tokens", "15T", "--days", "30"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("pctk: error: no size finishes in 30 days: the fastest within "
                             "the 16M tokens/step bound on the global batch takes")
    assert "on 256 node(s)" in err[0]


def test_a_given_size_above_the_bound_is_planned_with_a_warning(capsys):
    """Llama 3 405B ran 16,384 GPUs within 16M tokens per step with tensor and pipeline
    parallelism; FSDP alone would need 134M: planned as asked, and said."""
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--nodes", "300")
    assert code == 0 and plan["nodes"] == 300
    assert plan["global_batch"]["tokens_per_step"] == 300 * 8 * 8192
    (warn,) = plan["warnings"]
    assert warn["code"] == "batch-above-bound"
    assert "19,660,800 tokens/step" in warn["message"]
    assert "at most 256 nodes stay within the bound" in warn["message"]
    main(["plan", "--model", "8b", "--tokens", "1T", "--nodes", "300"])
    assert f"WARN: {warn['message']}\n" in capsys.readouterr().out
    # within the bound: no warning, and the recommendation says how far it could go
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--nodes", "256")
    assert code == 0 and plan["warnings"] == []
    assert plan["recommendation"]["why"] == (
        "as given by --nodes; the limits allow up to 256 (the largest count whose global "
        "batch stays <= 16M tokens/step)")


def test_a_plan_longer_than_a_year_warns_and_exits_0(capsys):
    # 8b on 15T tokens on 4 p4de nodes: main said 2,532 days with exit 0 and no remark
    argv = ["--model", "8b", "--tokens", "15T", "--nodes", "4", "--instance-type",
            "p4de.24xlarge"]
    code, plan = _plan(capsys, *argv)
    assert code == 0
    assert plan["days"] > 2500
    (warn,) = plan["warnings"]
    assert warn["code"] == "longer-than-a-year"
    _, widest = _plan(capsys, *argv[:4], "--nodes", "256", *argv[6:])
    assert warn["message"] == (
        f"the plan takes {plan['days']:,.0f} days ({plan['days'] / 365:.1f} years) on 4 "
        "nodes: longer than a year; 256 nodes (the largest count whose global batch stays "
        f"<= 16M tokens/step) would take {widest['days']:,.0f} days")
    assert widest["days"] < 365 and widest["warnings"] == []
    assert main(["plan", *argv]) == 0
    assert f"\nWARN: {warn['message']}\n" in capsys.readouterr().out


def test_a_plan_just_under_a_year_does_not_warn(capsys):
    # 8b on 15T on p5: 794 compute days on 4 nodes, so about 265 on 12
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "15T", "--nodes", "12")
    assert code == 0 and 200 < plan["days"] < 365 and plan["warnings"] == []
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "15T", "--nodes", "8")
    assert code == 0 and plan["days"] > 365
    assert [w["code"] for w in plan["warnings"]] == ["longer-than-a-year"]


def test_max_batch_tokens_sets_another_bound(capsys):
    # a 4M-token recipe (4,000,000 / 65,536 tokens per p5 node at 8,192): 61 nodes
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--budget", "1M",
                       "--max-batch-tokens", "4M")
    assert code == 0 and plan["nodes"] == 61
    assert plan["inputs"]["max_tokens_per_step"] == {"value": 4e6,
                                                     "source": "--max-batch-tokens"}
    assert plan["recommendation"]["why"].startswith(
        "the largest count whose global batch stays <= 4,000,000 tokens/step")
