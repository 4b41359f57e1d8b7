"""The loop's own collectives (loss, step times, peak memory, "which checkpoint"), over the mesh.

On a GPU node the process group has NCCL only, and NCCL is bound to device type ``cuda``: a
collective on a CPU tensor raises "No backend type associated with device type cpu". So every
figure the loop reduces itself is put on the training device and reduced over the training
mesh's groups, one mesh dimension after the other (a sum of row sums is the total, a max of
row maxima the maximum), never over a group or a device of its own choosing. The mesh's groups
are the ones FSDP communicates over, so whatever FSDP can do, this can.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh


def _groups(mesh: DeviceMesh) -> list[dist.ProcessGroup]:
    return [mesh.get_group(dim) for dim in range(mesh.ndim)]


def _reduce(values: Sequence[float], mesh: DeviceMesh, device: torch.device,
            op: dist.ReduceOp.RedOpType) -> list[float]:
    t = torch.tensor(list(values), dtype=torch.float64, device=device)
    for group in _groups(mesh):
        dist.all_reduce(t, op=op, group=group)
    return [float(x) for x in t.tolist()]


def mesh_sum(values: Sequence[float], mesh: DeviceMesh, device: torch.device) -> list[float]:
    """Each value summed over every rank of the mesh."""
    return _reduce(values, mesh, device, dist.ReduceOp.SUM)


def mesh_max(values: Sequence[float], mesh: DeviceMesh, device: torch.device) -> list[float]:
    """Each value's maximum over every rank of the mesh."""
    return _reduce(values, mesh, device, dist.ReduceOp.MAX)


def mesh_mean(value: torch.Tensor, mesh: DeviceMesh) -> float:
    """The mean of a scalar tensor over the mesh, reduced where the tensor lives."""
    t = value.detach().reshape(1).to(torch.float64)
    for group in _groups(mesh):
        dist.all_reduce(t, group=group)  # gloo has no AVG: sum, then divide
    return float(t.item()) / mesh.size()


def mesh_broadcast(obj: Any, mesh: DeviceMesh) -> Any:
    """Rank 0's ``obj`` on every rank: along each dimension from its coordinate 0 in turn."""
    box = [obj]
    for group in _groups(mesh):
        dist.broadcast_object_list(box, group=group, group_src=0)
    return box[0]


def mesh_barrier(mesh: DeviceMesh) -> None:
    for group in _groups(mesh):
        dist.barrier(group=group)
