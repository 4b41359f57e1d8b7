"""The limits a plan is held to, each with its source: the one place for them.

Global batch. ``pctk bench fsdp`` and the planner shard with FSDP or HSDP alone, so every GPU
takes at least ``--micro-batch`` whole sequences per step and a step is at least
``GPUs x micro-batch x sequence length`` tokens. More GPUs mean a larger batch, and past the
critical batch size more data parallelism buys little: the steps saved no longer make up for
the tokens each step spends (McCandlish et al. 2018, An Empirical Model of Large-Batch
Training, arXiv 1812.06162). The bound is the largest batch published for a comparable dense
pre-training run (:data:`BATCH_SOURCES`). A run on more GPUs than that needs tensor or
pipeline parallelism (several GPUs per sequence), which the planner does not model.

Length. A plan longer than a year is not a plan anyone runs; it is said, not refused.
"""

from __future__ import annotations

import math

# Llama 3's batch sizes are powers of two in tokens: 4M tokens in sequences of 4,096, then
# both doubled (8M in sequences of 8,192), then 16M, i.e. 2,048 sequences of 8,192. The paper
# gives the batch in tokens only, so "16M" is read as 16 x 2^20 (2,048 x 8,192).
MAX_TOKENS_PER_STEP = 16 * 2**20
BATCH_SOURCES = (
    "Llama 3 405B: 4M tokens per step at first, doubled to 8M, then to 16M after 2.87T tokens "
    "(Llama Team, The Llama 3 Herd of Models, arXiv 2407.21783, section 3.4.1)",
    "GPT-3 175B: 3.2M tokens per step (Brown et al. 2020, Language Models are Few-Shot "
    "Learners, arXiv 2005.14165, Table 2.1)",
)
BATCH_SOURCE = ("the largest global batch published for a comparable run: "
                + "; ".join(BATCH_SOURCES))

LONG_PLAN_DAYS = 365


def tokens_text(n: float) -> str:
    """``16M`` for 16 x 2^20 tokens, ``4,000,000`` otherwise."""
    if n >= 2**20 and n % 2**20 == 0:
        return f"{int(n) // 2**20}M"
    return f"{n:,.0f}"


def tokens_per_step(gpus: int, micro_batch: int, seq_len: int) -> int:
    """The smallest global batch of a data-parallel step: one micro-batch on every GPU."""
    return gpus * micro_batch * seq_len


def max_nodes_for_batch(bound: float, gpus_per_node: int, micro_batch: int,
                        seq_len: int) -> int:
    """The most nodes whose global batch stays within ``bound`` tokens (0: not even one)."""
    return math.floor(bound / tokens_per_step(gpus_per_node, micro_batch, seq_len))
