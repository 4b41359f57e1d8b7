"""Write the synthetic chat set the SFT workload ships with (deterministic: same bytes on
every run).

    python -m benchmarks.fsdp.sft_synth [--out benchmarks/fsdp/sft_chat.jsonl] [--seed 0]

Conversations in the common ``{"messages": [{"role": ..., "content": ...}, ...]}`` layout,
one or two user/assistant turns. Turn lengths (in words) are log-normal, as measured on
public chat-tuning sets: prompts short with a long tail, responses about three times longer
and wider, so that one sample per row wastes most of a fixed-length row on padding.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

DEFAULT_OUT = Path(__file__).with_name("sft_chat.jsonl")
CONVERSATIONS = 400
# log-normal word counts: median exp(mu), spread sigma
PROMPT_WORDS = (math.log(12), 0.8)
RESPONSE_WORDS = (math.log(40), 0.9)
MAX_WORDS = 400
WORDS = ("the", "node", "job", "queue", "gpu", "rank", "shard", "step", "token", "loss",
         "model", "batch", "cluster", "slurm", "memory", "network", "bandwidth", "latency",
         "checkpoint", "gradient", "layer", "attention", "kernel", "throughput", "and", "of",
         "to", "a", "is", "in", "why", "how", "what", "does", "each", "when", "with", "per")


def words(rng: random.Random, mu_sigma: tuple[float, float]) -> str:
    n = max(1, min(MAX_WORDS, round(rng.lognormvariate(*mu_sigma))))
    return " ".join(rng.choice(WORDS) for _ in range(n))


def conversations(n: int, seed: int) -> list[dict[str, list[dict[str, str]]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        messages = []
        for _turn in range(1 if rng.random() < 0.8 else 2):
            messages.append({"role": "user", "content": words(rng, PROMPT_WORDS) + "?"})
            messages.append({"role": "assistant", "content": words(rng, RESPONSE_WORDS) + "."})
        out.append({"messages": messages})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fsdp.sft_synth",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--conversations", type=int, default=CONVERSATIONS)
    args = p.parse_args(argv)
    lines = [json.dumps(c, separators=(",", ":")) for c in
             conversations(args.conversations, args.seed)]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{args.out}: {len(lines)} conversations, {args.out.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
