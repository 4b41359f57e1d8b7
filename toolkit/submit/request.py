"""Whether a queue can ever hold a request (GPUs per node, node count), from the config alone.

``pctk submit`` and :class:`toolkit.submit.executor.ClusterExecutor` ask the same question
with the same words, before anything reaches Slurm (which would accept such a job and leave it
pending forever).
"""

from __future__ import annotations

from toolkit import catalog
from toolkit.config.model import ComputeResource, Queue
from toolkit.errors import PctkError


def gpus_per_node(resource: ComputeResource) -> int:
    """NVIDIA GPUs on each node of a compute resource (0 for CPU, Neuron, unknown types)."""
    inst = catalog.find(resource.instance_type)
    return inst.gpus if inst else 0


def check_request(queue: Queue, resource: ComputeResource, gpus: int | None, nodes: int) -> int:
    """Raise a one-line PctkError when the queue can never run it; returns the GPUs a node
    of ``resource`` has."""
    have = gpus_per_node(resource)
    if gpus and gpus > have:
        raise PctkError(
            f"queue {queue.name} runs {resource.instance_type}, which has {have} GPUs per node; "
            f"{gpus} were asked for",
            f"use --gpus-per-node {have} or less" if have else "pick a GPU queue",
        )
    max_nodes = sum(cr.max_count for cr in queue.compute_resources)
    if nodes < 1 or nodes > max_nodes:
        raise PctkError(f"queue {queue.name} has at most {max_nodes} nodes; {nodes} were asked for")
    return have
