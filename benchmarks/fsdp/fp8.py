"""float8 training (``--fp8``): torchao's float8 linear layers in the transformer blocks.

What changes: every ``nn.Linear`` inside a block (wq, wk, wv, wo, w1, w2, w3) becomes
torchao's ``Float8Linear`` with dynamic tensorwise scales (torchao's default recipe, the one
torchtitan's ``--model.converters float8`` uses): the matmuls run in float8 e4m3 on the
tensor cores with bf16 outputs, the weights stay fp32 under FSDP2, the all-gather stays
bf16. The embedding and the output projection over the 128k vocabulary stay bf16, as in
torchtitan (the output's numerics matter most and its shape does not split evenly).

float8 tensor cores exist from compute capability 8.9 on (Ada: L4, L40S; Hopper: H100,
H200; Blackwell); anything else is refused in one line before the model is built. MFU of an
fp8 run divides by the GPU's dense fp8 peak (:mod:`benchmarks.hardware`), stated in the
record as ``mfu_dtype: float8``.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from torch import nn

MIN_CAPABILITY = (8, 9)


def unavailable(device: torch.device) -> str | None:
    """Why fp8 training cannot run on ``device``, in one line, or None when it can."""
    if device.type != "cuda":
        return (f"--fp8 needs an NVIDIA GPU of compute capability 8.9 or newer (sm89+: Ada, "
                f"Hopper, Blackwell); this run is on {device.type}")
    cap = torch.cuda.get_device_capability(device)
    if cap < MIN_CAPABILITY:
        return (f"--fp8 needs compute capability 8.9 or newer (sm89+); "
                f"{torch.cuda.get_device_name(device)} is sm{cap[0]}{cap[1]}")
    try:
        importlib.import_module("torchao.float8")
    except ImportError as exc:
        return f"--fp8 needs torchao (pip install torchao): {exc}"
    return None


def block_linear(module: nn.Module, fqn: str) -> bool:
    """torchao's module filter: the linear layers inside the blocks, with dimensions that
    float8 matmuls take (multiples of 16)."""
    return (isinstance(module, nn.Linear) and fqn.startswith("layers.")
            and module.in_features % 16 == 0 and module.out_features % 16 == 0)


def convert(model: nn.Module) -> int:
    """Swap the blocks' linear layers for float8 ones in place; returns how many."""
    ao: Any = importlib.import_module("torchao.float8")
    before = sum(isinstance(m, nn.Linear) for m in model.modules())
    ao.convert_to_float8_training(model, module_filter_fn=block_linear,
                                  config=ao.Float8LinearConfig())
    after = sum(type(m) is nn.Linear for m in model.modules())
    return before - after
