"""Supervised fine-tuning data: chat JSONL, a byte-level tokenizer, packing into fixed-length
rows with per-document attention masking, the prompt masked out of the loss.

A conversation becomes one token sequence: BOS, then per message ``<role>\\n`` + content +
``\\n`` as bytes, the assistant's content and a closing EOS being the only trained targets.
Sequences longer than ``seq_len + 1`` tokens are truncated (counted in the record).

Packing (first fit, in file order) puts several documents into one row of ``seq_len``
positions. Each token's position restarts at 0 in its document and a boolean
``(batch, 1, seq, seq)`` mask lets a query see only earlier tokens of its own document
(``F.scaled_dot_product_attention`` with an explicit block-diagonal causal mask); padding
forms a document of its own with no targets. So a packed row computes, token for token,
what each of its documents computes alone: tests/fsdp/test_sft.py checks loss and gradients.

The loss of a step is the sum of the token losses over every rank's rows divided by the
number of trained tokens in the whole global batch (times the world size, as FSDP averages
gradients over ranks): each trained token weighs the same however the documents fall into
rows and ranks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.fsdp.data import DataError, TokenBatches

DEFAULT_DATA = Path(__file__).with_name("sft_chat.jsonl")
CPU_SEQ_LEN = 1024  # default row length on CPUs: most synthetic samples fit whole
PAD, BOS, EOS, BYTE0 = 0, 1, 2, 3
VOCAB = BYTE0 + 256
IGNORE = -100  # F.cross_entropy's ignore_index
ATTENTION = ("sdpa with an explicit block-diagonal causal mask (batch, 1, seq, seq); "
             "positions restart per document")


def encode(text: str) -> list[int]:
    return [BYTE0 + b for b in text.encode("utf-8")]


@dataclass(frozen=True)
class Sample:
    tokens: list[int]
    trained: list[bool]  # tokens[i] is a target to learn (assistant content and its EOS)
    truncated: bool

    @property
    def positions(self) -> int:
        """Input positions it occupies in a row (every token but the last is an input)."""
        return len(self.tokens) - 1

    @property
    def loss_tokens(self) -> int:
        return sum(self.trained[1:])


def tokenize(messages: list[dict[str, str]], max_tokens: int) -> Sample:
    tokens, trained = [BOS], [False]
    for m in messages:
        head = encode(f"<{m['role']}>\n")
        body = encode(m["content"])
        learn = m["role"] == "assistant"
        tokens += head + body
        trained += [False] * len(head) + [learn] * len(body)
        if learn:
            tokens.append(EOS)
            trained.append(True)
        tokens += encode("\n")
        trained.append(False)
    truncated = len(tokens) > max_tokens
    return Sample(tokens[:max_tokens], trained[:max_tokens], truncated)


def read_conversations(path: Path) -> list[list[dict[str, str]]]:
    """Conversations of a JSONL file: ``{"messages": [{"role", "content"}, ...]}`` or
    ``{"prompt": ..., "completion"|"response": ...}`` per line. ValueError names the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{number}: not JSON ({exc.msg})") from None
        out.append(_messages(obj, f"{path}:{number}"))
    if not out:
        raise DataError(f"{path}: no conversations")
    return out


def _messages(obj: Any, where: str) -> list[dict[str, str]]:
    if isinstance(obj, dict) and isinstance(obj.get("messages"), list):
        msgs = obj["messages"]
        if msgs and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                        and isinstance(m.get("content"), str) for m in msgs):
            if any(m["role"] == "assistant" for m in msgs):
                return [{"role": m["role"], "content": m["content"]} for m in msgs]
            raise DataError(f"{where}: no assistant message to train on")
    if isinstance(obj, dict) and isinstance(obj.get("prompt"), str):
        reply = obj.get("completion", obj.get("response"))
        if isinstance(reply, str):
            return [{"role": "user", "content": obj["prompt"]},
                    {"role": "assistant", "content": reply}]
    raise DataError(f"{where}: expected {{\"messages\": [{{\"role\", \"content\"}}, ...]}} "
                     "or {\"prompt\", \"completion\"}")


def pack(samples: list[Sample], seq_len: int, packed: bool = True) -> list[list[int]]:
    """Rows as lists of sample indices: first fit in file order, or one sample per row."""
    if not packed:
        return [[i] for i in range(len(samples))]
    rows: list[list[int]] = []
    free: list[int] = []
    for i, s in enumerate(samples):
        for r, room in enumerate(free):
            if s.positions <= room:
                rows[r].append(i)
                free[r] -= s.positions
                break
        else:
            rows.append([i])
            free.append(seq_len - s.positions)
    return rows


def build_row(samples: list[Sample], seq_len: int) -> dict[str, torch.Tensor]:
    """inputs, targets (IGNORE where not trained), positions and document ids of one row;
    padding is document -1 with IGNORE targets."""
    inputs = torch.full((seq_len,), PAD, dtype=torch.long)
    targets = torch.full((seq_len,), IGNORE, dtype=torch.long)
    positions = torch.zeros(seq_len, dtype=torch.long)
    docs = torch.full((seq_len,), -1, dtype=torch.long)
    at = 0
    for doc, s in enumerate(samples):
        n = s.positions
        tok = torch.tensor(s.tokens, dtype=torch.long)
        keep = torch.tensor(s.trained[1:], dtype=torch.bool)
        inputs[at:at + n] = tok[:-1]
        targets[at:at + n] = torch.where(keep, tok[1:], IGNORE)
        positions[at:at + n] = torch.arange(n)
        docs[at:at + n] = doc
        at += n
    positions[at:] = torch.arange(seq_len - at)
    return {"inputs": inputs, "targets": targets, "positions": positions, "docs": docs}


def document_mask(docs: torch.Tensor) -> torch.Tensor:
    """(batch, 1, seq, seq) True where query q may attend key k: same document, k <= q."""
    seq = docs.shape[-1]
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    same = docs[:, :, None] == docs[:, None, :]
    return (same & causal)[:, None]


class PackedBatches(TokenBatches):
    """Rows of chat samples for ``--workload sft``; row i of step s is packed row
    ``(s·B + i) mod rows`` (like FileBatches), so the data does not depend on the world size.
    ``local_batch`` returns (inputs, targets, extras): positions, mask and the loss scale."""

    def __init__(self, path: Path, batch_size: int, seq_len: int, rank: int, world_size: int,
                 packed: bool = True):
        super().__init__(batch_size, seq_len, rank, world_size)
        self.path, self.packed, self.world_size = path, packed, world_size
        self.samples = [tokenize(m, seq_len + 1) for m in read_conversations(path)]
        self.row_docs = pack(self.samples, seq_len, packed)
        self.row_real = [sum(self.samples[i].positions for i in r) for r in self.row_docs]
        self.row_loss = [sum(self.samples[i].loss_tokens for i in r) for r in self.row_docs]

    def row_ids(self, step: int, rows: range) -> list[int]:
        return [(step * self.batch_size + i) % len(self.row_docs) for i in rows]

    def real_tokens(self, step: int) -> int:
        """Input positions holding a token (not padding) in the global batch of ``step``."""
        return sum(self.row_real[r] for r in self.row_ids(step, range(self.batch_size)))

    def loss_tokens(self, step: int) -> int:
        return sum(self.row_loss[r] for r in self.row_ids(step, range(self.batch_size)))

    def local_batch(self, step: int, device: torch.device  # type: ignore[override]
                    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        built = [build_row([self.samples[i] for i in self.row_docs[r]], self.seq_len)
                 for r in self.row_ids(step, range(self.rows.start, self.rows.stop))]
        cols = {k: torch.stack([b[k] for b in built]) for k in built[0]}
        pin = device.type == "cuda"
        moved = {k: (v.pin_memory() if pin else v).to(device, non_blocking=True)
                 for k, v in cols.items()}
        mask = document_mask(cols["docs"])
        extras = {"positions": moved["positions"],
                  "mask": (mask.pin_memory() if pin else mask).to(device, non_blocking=True),
                  "scale": self.world_size / max(1, self.loss_tokens(step))}
        return moved["inputs"], moved["targets"], extras

    def padding(self) -> dict[str, float | int]:
        real = sum(s.positions for s in self.samples)
        seq = self.seq_len
        packed_rows = len(pack(self.samples, seq, True))
        return {"padding_fraction_packed": 1 - real / (packed_rows * seq),
                "padding_fraction_unpacked": 1 - real / (len(self.samples) * seq),
                "rows_packed": packed_rows, "rows_unpacked": len(self.samples)}

    def describe(self) -> dict[str, Any]:
        lengths = sorted(s.positions + 1 for s in self.samples)
        return {"source": "sft-jsonl", "path": str(self.path), "samples": len(self.samples),
                "tokenizer": f"bytes (vocab {VOCAB}: pad, bos, eos, 256 bytes)",
                "packed": self.packed, "rows": len(self.row_docs),
                "truncated_samples": sum(s.truncated for s in self.samples),
                "sample_tokens_p50": lengths[len(lengths) // 2],
                "sample_tokens_max": lengths[-1],
                "trained_tokens": sum(s.loss_tokens for s in self.samples),
                "attention": ATTENTION, **self.padding()}


def token_loss_sum(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Sum of the trained tokens' losses (IGNORE targets left out), in fp32."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(),
                           ignore_index=IGNORE, reduction="sum")


def loss_function(compiled: bool) -> Any:
    """:func:`token_loss_sum`, compiled with ``--compile`` as pre-training's loss is (no fp32
    copy of the logits); the step's scale multiplies outside, so it never recompiles."""
    return torch.compile(token_loss_sum) if compiled else token_loss_sum


def packed_loss(logits: torch.Tensor, targets: torch.Tensor, extras: dict[str, Any]
                ) -> torch.Tensor:
    """Sum of the trained tokens' losses times ``extras["scale"]`` (world / global count)."""
    return token_loss_sum(logits, targets) * extras["scale"]


def real_figures(top: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    """The record's headline figures on real tokens for an sft run: tokens/s, TFLOPs and MFU
    of padding-free tokens, the row-slot figures kept as ``slot_*``; others unchanged."""
    if workload.get("workload") != "sft" or "real_tokens_per_s_per_gpu" not in workload:
        return top
    return {**top,
            "slot_tokens_per_s_per_gpu": top.get("tokens_per_s_per_gpu"),
            "slot_mfu": top.get("mfu"),
            "tokens_per_s_per_gpu": workload["real_tokens_per_s_per_gpu"],
            "tflops_per_gpu": workload["real_tflops_per_gpu"],
            "mfu": workload["real_mfu"],
            "tokens_counted": "real tokens (padding excluded)"}


def summary(data: PackedBatches, steps: list[int], step_times: list[float], world: int,
            flops_per_token: int, peak: float | None) -> dict[str, Any]:
    """Real-token throughput and MFU of the measured ``steps`` (their times in order)."""
    out: dict[str, Any] = {"workload": "sft", **data.padding(),
                           "packed": data.packed, "attention": ATTENTION,
                           "flops_accounting": "per real token at the row length (torchtitan's "
                           "attention term), though a packed document attends only within "
                           "itself: the real-token MFU of short documents is an upper bound"}
    if not step_times:
        return out
    real = sum(data.real_tokens(s) for s in steps)
    slots = len(steps) * data.batch_size * data.seq_len
    tps = real / sum(step_times) / world
    tflops = tps * flops_per_token / 1e12
    out.update(real_tokens_per_s_per_gpu=tps, real_tflops_per_gpu=tflops,
               real_mfu=tflops / peak if peak else None,
               padding_fraction_measured=1 - real / slots)
    return out
