"""The KV-cache forward gives the training forward's logits, and the roofline's parameter
count (benchmarks/modelmath.py) is the model's."""

from __future__ import annotations

import pytest
import torch

from benchmarks import modelmath
from benchmarks.fsdp.config import PRESETS
from benchmarks.fsdp.model import Transformer, count_params
from benchmarks.inference.kvcache import KVCache, forward


@pytest.fixture
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(PRESETS["tiny"]).eval()


def test_prefill_then_decode_matches_the_full_forward(model: Transformer) -> None:
    tokens = torch.randint(0, 512, (3, 20))
    with torch.no_grad():
        full = model(tokens)
        cache = KVCache.empty(model, 3, 20, torch.float32, torch.device("cpu"))
        cached = [forward(model, tokens[:, :12], cache, 0)]
        cached += [forward(model, tokens[:, p:p + 1], cache, p) for p in range(12, 20)]
    torch.testing.assert_close(torch.cat(cached, dim=1), full, rtol=1e-4, atol=1e-4)


def test_expanded_cache_continues_every_sample_like_the_prompt(model: Transformer) -> None:
    prompt = torch.randint(0, 512, (1, 10))
    nxt = torch.randint(0, 512, (4, 1))
    with torch.no_grad():
        first = KVCache.empty(model, 1, 10, torch.float32, torch.device("cpu"))
        forward(model, prompt, first, 0)
        cache = first.expand(4, 10, 16)
        got = forward(model, nxt, cache, 10)[:, -1]
        want = model(torch.cat([prompt.expand(4, -1), nxt], dim=1))[:, -1]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert cache.nbytes == 2 * 2 * 4 * 2 * 16 * 16 * 4  # K,V x layers x batch x kv x len x hd


def test_misuse_is_refused(model: Transformer) -> None:
    cache = KVCache.empty(model, 1, 8, torch.float32, torch.device("cpu"))
    with pytest.raises(ValueError, match="one token"):
        forward(model, torch.zeros(1, 2, dtype=torch.long), cache, 3)
    with pytest.raises(ValueError, match="past the cache"):
        forward(model, torch.zeros(1, 9, dtype=torch.long), cache, 0)


@pytest.mark.parametrize("name", ["tiny", "small", "1b"])
def test_roofline_counts_the_models_parameters(name: str) -> None:
    with torch.device("meta"):
        model = Transformer(PRESETS[name])
    assert modelmath.shape_of(PRESETS[name]).params_non_embedding == count_params(model)[1]


def test_node_refuses_what_it_cannot_run_in_one_line(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.inference import bench

    for argv, message in (
            (["--device", "cuda"] if not torch.cuda.is_available() else ["--context", "2000"],
             "no CUDA device here" if not torch.cuda.is_available() else "exceed"),
            (["--context", "1000", "--decode-tokens", "100"], "1102 tokens exceed the tiny"),
            *([(["--cuda-graph"], "--cuda-graph needs a CUDA device")]
              if not torch.cuda.is_available() else [])):
        with pytest.raises(SystemExit) as stop:
            bench.main(["run", "--parts", str(tmp_path), *argv])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1


def test_benchmark_model_is_built_in_its_dtype_with_float32_rotary_angles() -> None:
    from benchmarks.fsdp.model import rope_frequencies
    from benchmarks.inference.bench import build_model

    model = build_model("tiny", torch.bfloat16, torch.device("cpu"))
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    a = PRESETS["tiny"]
    torch.testing.assert_close(model.get_buffer("freqs"),
                               rope_frequencies(a.head_dim, a.max_seq_len, a.rope_theta))
    assert model.layers["0"].attention.wq.weight.float().std() > 0.01  # initialised
    with torch.device("meta"):
        full = Transformer(a)
    assert modelmath.resident_weight_bytes(modelmath.shape_of(a), 2) == 2 * count_params(full)[0]


def test_static_decode_matches_the_dynamic_one(model: Transformer) -> None:
    from benchmarks.inference.kvcache import decode_static

    tokens = torch.randint(0, 512, (2, 14))
    with torch.no_grad():
        full = model(tokens)
        cache = KVCache.empty(model, 2, 20, torch.float32, torch.device("cpu"))
        cache.k[0].fill_(1e4)  # unfilled positions are masked out
        cache.v[0].fill_(1e4)
        forward(model, tokens[:, :9], cache, 0)
        steps = [decode_static(model, tokens[:, p:p + 1], cache, torch.tensor(p))
                 for p in range(9, 14)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full[:, 9:], rtol=1e-4, atol=1e-4)
