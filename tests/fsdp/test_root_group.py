"""The memory model's root group, checked on real FSDP2 ranks (gloo, two processes on this
machine): after forward, before backward, the parameters left gathered are exactly the root
group the model counts (:attr:`benchmarks.modelmath.Shape.root_params`) plus the last block,
which pctk's FSDP wrapping keeps for the backward that starts with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from benchmarks.fsdp.config import preset
from benchmarks.modelmath import shape_of
from tests.fsdp.fsdp_launch import free_port

REPO = Path(__file__).resolve().parents[2]

RANK = textwrap.dedent("""
    import json, os, sys
    import torch, torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from benchmarks.fsdp.config import ParallelConfig, preset
    from benchmarks.fsdp.model import Transformer
    from benchmarks.fsdp.parallelize import build_mesh, parallelize

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = parallelize(Transformer(preset("tiny")), build_mesh("cpu", 2, 2, False),
                        ParallelConfig())
    tokens = torch.randint(0, 512, (2, 16))
    loss = model(tokens).float().mean()
    whole = {n: p.numel() for n, p in model.named_parameters() if not isinstance(p, DTensor)}
    loss.backward()
    if dist.get_rank() == 0:
        print(json.dumps(whole))
    dist.destroy_process_group()
""")


def test_after_forward_the_root_group_and_the_last_block_stay_gathered(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MASTER_"))}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2",
               PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, str(script)], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    whole: dict[str, int] = json.loads(outs[0][0].strip().splitlines()[-1])
    args = preset("tiny")
    last = f"layers.{args.n_layers - 1}."
    root = {n: k for n, k in whole.items() if not n.startswith("layers.")}
    assert set(root) == {"tok_embeddings.weight", "norm.weight", "output.weight"}
    assert sum(root.values()) == shape_of(args).root_params
    blocks = {n for n in whole if n.startswith("layers.")}
    assert blocks and all(n.startswith(last) for n in blocks), blocks
    assert sum(whole[n] for n in blocks) == shape_of(args).block_params
