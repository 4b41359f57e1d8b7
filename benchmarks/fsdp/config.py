"""Model shapes as dataclasses, without torch, so the driver can validate names cheaply."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelArgs:
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    norm_eps: float = 1e-5
    rope_theta: float = 500_000.0
    max_seq_len: int = 8192

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def to_dict(self) -> dict[str, int | float]:
        return asdict(self)


PRESETS: dict[str, ModelArgs] = {
    # CI and the twin: a few hundred thousand parameters
    "tiny": ModelArgs(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=256, vocab_size=512,
                      max_seq_len=1024),
    # still CPU-friendly, big enough for the step time to dwarf the launch overhead
    "small": ModelArgs(dim=512, n_layers=8, n_heads=8, n_kv_heads=4, ffn_dim=1536,
                       vocab_size=32_000, max_seq_len=2048),
    # Llama 3.2 1B
    "1b": ModelArgs(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_dim=8192,
                    vocab_size=128_256),
    # Llama 3.1 8B
    "8b": ModelArgs(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14_336,
                    vocab_size=128_256),
    # Llama 3.1 70B
    "70b": ModelArgs(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim=28_672,
                     vocab_size=128_256),
}


def preset(name: str) -> ModelArgs:
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}"
        ) from None
