"""A servable checkpoint of one of pctk's shapes, made here with no model hub.

    python -m benchmarks.serving.checkpoint --model tiny --out RUN/model

writes a ``LlamaForCausalLM`` of the preset's shape (``benchmarks.fsdp.config.PRESETS``,
random weights, untied, fp32 on CPU servers or bf16 for GPU servers) and a tokenizer built
locally with the ``tokenizers`` library, both with ``save_pretrained``: any server that reads
a transformers checkpoint folder (``transformers serve``, ``vllm serve``) loads it offline.

The tokenizer is a word-level one: the words and punctuation of ``corpus.txt`` (shipped
beside this file) plus filler words ``w<i>`` up to the shape's vocabulary, so that every id a
random model emits decodes to one non-empty word and each streamed chunk carries one token.
The checkpoint has no end-of-sequence token, so every answer runs to ``max_tokens``: a
request's output length is the one asked for, whatever the random weights emit.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

from benchmarks.fsdp.config import PRESETS

CORPUS = Path(__file__).with_name("corpus.txt")
SPECIALS = ("<unk>", "<pad>", "<s>")
# the chat template servers apply to /v1/chat/completions: the messages' text, nothing added
CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }} {% endfor %}"


def corpus_words() -> list[str]:
    """The corpus as the tokenizer splits it (lower case, words and punctuation)."""
    import re

    return re.findall(r"\w+|[^\w\s]", CORPUS.read_text().lower())


def vocabulary(size: int) -> dict[str, int]:
    words = list(dict.fromkeys([*SPECIALS, *corpus_words()]))
    if size < len(words):
        raise ValueError(f"a vocabulary of {size} is smaller than the corpus's {len(words)}")
    words += [f"w{i}" for i in range(size - len(words))]
    return {w: i for i, w in enumerate(words)}


def build_tokenizer(size: int) -> Any:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel(vocabulary(size), unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   bos_token="<s>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build(model: str, out: Path, dtype: str = "float32", seed: int = 0) -> Path:
    import torch
    import transformers

    shape = PRESETS[model]
    torch.manual_seed(seed)
    # transformers 5 reads it into rope_parameters; 4.x keeps it as rope_theta
    rope: dict[str, Any] = {"rope_theta": shape.rope_theta}
    config = transformers.LlamaConfig(
        hidden_size=shape.dim, intermediate_size=shape.ffn_dim,
        num_hidden_layers=shape.n_layers, num_attention_heads=shape.n_heads,
        num_key_value_heads=shape.n_kv_heads, vocab_size=shape.vocab_size,
        rms_norm_eps=shape.norm_eps, **rope,
        max_position_embeddings=shape.max_seq_len, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False, bos_token_id=SPECIALS.index("<s>"),
        eos_token_id=None, pad_token_id=SPECIALS.index("<pad>"))
    net = transformers.LlamaForCausalLM(config).to(getattr(torch, dtype))
    net.generation_config.eos_token_id = None
    net.generation_config.pad_token_id = SPECIALS.index("<pad>")
    out.mkdir(parents=True, exist_ok=True)
    net.save_pretrained(out)
    build_tokenizer(shape.vocab_size).save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.serving.checkpoint")
    p.add_argument("--model", default="tiny", choices=sorted(PRESETS))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    a = p.parse_args(argv)
    if importlib.util.find_spec("transformers") is None:
        print("benchmarks.serving.checkpoint: transformers is not installed "
              "(pip install 'pctk[serving]')", file=sys.stderr)
        return 2
    build(a.model, a.out, a.dtype)
    print(f"pctk-serve: checkpoint {a.model} in {a.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
