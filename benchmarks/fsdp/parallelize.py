"""Where sharding happens: activation checkpointing, torch.compile and FSDP2 per block.

Order matters and follows torchtitan: wrap each block for activation checkpointing, compile
each block, ``fully_shard`` each block, then ``fully_shard`` the root (embedding, final norm
and output projection form the root's own parameter group).
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    checkpoint_wrapper,
)
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from benchmarks.fsdp.config import ParallelConfig
from benchmarks.fsdp.model import Transformer


def build_mesh(device_type: str, world_size: int, ranks_per_node: int, hsdp: bool,
               backend: str | None = None) -> DeviceMesh:
    """1-D ``(dp_shard,)`` mesh for FSDP, 2-D ``(dp_replicate, dp_shard)`` for HSDP; with
    ``backend`` (e.g. "cpu:gloo") each dimension gets a group of its own with that backend."""
    names = ("dp_replicate", "dp_shard") if hsdp else ("dp_shard",)
    override: dict[int | str, str] | None = (
        dict.fromkeys(names, backend) if backend else None)
    if not hsdp:
        return init_device_mesh(device_type, (world_size,), mesh_dim_names=names,
                                backend_override=override)  # type: ignore[arg-type]
    if ranks_per_node < 1 or world_size % ranks_per_node:
        raise ValueError(
            f"HSDP needs the world size ({world_size}) to be a multiple of the ranks per node "
            f"({ranks_per_node})"
        )
    return init_device_mesh(
        device_type,
        (world_size // ranks_per_node, ranks_per_node),
        mesh_dim_names=names,
        backend_override=override,  # type: ignore[arg-type]
    )


def compute_dtype(device_type: str, bf16: bool, fp8: bool = False) -> str:
    """What the matmuls run in: bf16 on GPUs unless --fp32 (the blocks' in float8 with
    --fp8); fp32 on CPUs."""
    if device_type == "cuda" and fp8:
        return "float8"
    return "bfloat16" if device_type == "cuda" and bf16 else "float32"


def mixed_precision(device_type: str, bf16: bool) -> MixedPrecisionPolicy:
    """bf16 compute with fp32 gradient reduction on GPUs; plain fp32 elsewhere."""
    if device_type == "cuda" and bf16:
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32)


def shard_group_size(mesh: DeviceMesh) -> int:
    """GPUs one parameter is sharded over (the ``dp_shard`` dimension)."""
    return mesh["dp_shard"].size() if mesh.ndim > 1 else mesh.size()


def reshard_after_forward(index: int, blocks: int, shard: int) -> bool:
    """Free a block's gathered parameters after its forward? Not for the last block (the
    backward needs it at once), and not when the shard group is one GPU: there the
    "all-gather" is a cast-and-copy of the whole block, and keeping the bf16 copy until the
    backward saves a second one per step, for the memory that autocast's cached weight casts
    use in a plain loop."""
    return shard > 1 and index < blocks - 1


def parallelize(model: Transformer, mesh: DeviceMesh, cfg: ParallelConfig) -> Transformer:
    policy = mixed_precision(mesh.device_type, cfg.bf16)
    if cfg.fp8:  # before compile and sharding: FSDP2 shards torchao's Float8Linear weights
        from benchmarks.fsdp import fp8

        fp8.convert(model)
    shard = shard_group_size(mesh)
    blocks = list(model.layers.items())
    for index, (name, block) in enumerate(blocks):
        block = cast(nn.Module, block)
        if cfg.activation_checkpointing:
            block = checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        if cfg.compile:
            # compile the block, not the module with FSDP's hooks: the all-gathers stay outside
            # the graph (torchtitan's order). get_state_dict drops the "_orig_mod." prefix.
            block = cast(nn.Module, torch.compile(block, fullgraph=True))
        fully_shard(block, mesh=mesh, mp_policy=policy,
                    reshard_after_forward=reshard_after_forward(index, len(blocks), shard))
        model.layers.register_module(name, block)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def materialise(model: nn.Module, device: torch.device) -> None:
    """Allocate a meta-device model's (sharded) storage on ``device`` and initialise it."""
    model.to_empty(device=device)
    with torch.no_grad():
        model.init_weights()  # type: ignore[operator]
