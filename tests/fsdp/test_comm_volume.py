"""The communication model against the bytes a real FSDP2 step moves: gloo ranks on this
machine run pctk's wrapping (:mod:`benchmarks.fsdp.parallelize`) with FSDP2's collectives
counted as they are called, and each kind's bytes in one steady step (the second) equal
:func:`benchmarks.modelmath.fsdp_step`'s ``size_bytes``, summed the way nccl-tests sizes a
buffer (an all-gather's output, a reduce-scatter's input, an all-reduce's buffer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.fsdp.config import preset
from benchmarks.modelmath import fsdp_step, shape_of
from tests.fsdp.fsdp_launch import free_port

REPO = Path(__file__).resolve().parents[2]

# FSDP2's collectives are called through these two classes (torch's private module, named
# here so that a torch that moves them fails this test loudly) and dist.all_reduce (HSDP)
RANK = textwrap.dedent("""
    import json, os, sys
    from collections import Counter
    import torch, torch.distributed as dist
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives as fc
    from benchmarks.fsdp.config import ParallelConfig, preset
    from benchmarks.fsdp.model import Transformer
    from benchmarks.fsdp.parallelize import build_mesh, parallelize

    moved = Counter()

    def nbytes(t):
        return t.numel() * t.element_size()

    gather, scatter, reduce = fc.DefaultAllGather.__call__, fc.DefaultReduceScatter.__call__, \\
        dist.all_reduce

    def counted_gather(self, output_tensor, input_tensor, group, async_op=False):
        moved["all_gather"] += nbytes(output_tensor)
        return gather(self, output_tensor, input_tensor, group, async_op)

    def counted_scatter(self, output_tensor, input_tensor, group, op, async_op=False):
        moved["reduce_scatter"] += nbytes(input_tensor)
        return scatter(self, output_tensor, input_tensor, group, op, async_op)

    def counted_reduce(tensor, *args, **kwargs):
        moved["all_reduce"] += nbytes(tensor)
        return reduce(tensor, *args, **kwargs)

    fc.DefaultAllGather.__call__ = counted_gather
    fc.DefaultReduceScatter.__call__ = counted_scatter
    dist.all_reduce = counted_reduce

    world, per_node, hsdp = int(os.environ["WORLD_SIZE"]), int(sys.argv[1]), sys.argv[2] == "1"
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = parallelize(Transformer(preset("tiny")), build_mesh("cpu", world, per_node, hsdp),
                        ParallelConfig(hsdp=hsdp))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    steps = []
    for _ in range(2):
        moved.clear()
        tokens = torch.randint(0, 512, (2, 16))
        model(tokens).float().mean().backward()
        optim.step()
        optim.zero_grad()
        steps.append(dict(moved))
    if dist.get_rank() == 0:
        print(json.dumps(steps))
    dist.destroy_process_group()
""")


@pytest.mark.parametrize(("world", "per_node", "hsdp"), [(2, 2, False), (4, 2, True)])
def test_the_bytes_fsdp2_moves_are_the_models(tmp_path: Path, world: int, per_node: int,
                                              hsdp: bool) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MASTER_"))}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world),
               PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(script), str(per_node), str(int(hsdp))],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r % per_node)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(world)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * world, outs
    steady = json.loads(outs[0][0].strip().splitlines()[-1])[1]
    predicted: dict[str, int] = {}
    # CPU ranks gather in fp32 (the compute dtype there) and reduce in fp32
    for t in fsdp_step(shape_of(preset("tiny")), world=world, ranks_per_node=per_node,
                       hsdp=hsdp, param_bytes=4):
        predicted[t.collective] = predicted.get(t.collective, 0) + t.size_bytes
    assert steady == predicted
