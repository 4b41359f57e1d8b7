"""The plain-loop reference peer (benchmarks/reference/plain_loop.py): it trains pctk's shape
on the CPU, counts FLOPs as pctk does and writes a record ``pctk results add`` takes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.fsdp.config import preset
from benchmarks.fsdp.model import Transformer, count_params
from benchmarks.modelmath import shape_of, training_flops_per_token

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers is not installed (pip install "
                                "'pctk[reference]'); the plain-loop peer needs it")


@pytest.mark.parametrize("model", ["tiny", "1b"])
def test_the_peer_has_pctks_parameters_and_flops(model: str) -> None:
    from benchmarks.reference.plain_loop import hf_model

    args = preset(model)
    with torch.device("meta"):
        hf = hf_model(args, 4096)
        ours = Transformer(args)
    total = sum(p.numel() for p in hf.parameters())
    non_embedding = total - hf.get_input_embeddings().weight.numel()
    assert (total, non_embedding) == count_params(ours)
    assert hf.get_output_embeddings().weight is not hf.get_input_embeddings().weight
    # the peer's FLOPs per token are pctk's formula, over the parameters its model has
    attention = 12 * args.n_layers * args.n_heads * args.head_dim * 4096
    assert training_flops_per_token(shape_of(args), 4096) == 6 * non_embedding + attention


def test_the_peer_trains_on_the_cpu_and_its_record_is_accepted(tmp_path: Path) -> None:
    out = tmp_path / "plain.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.reference.plain_loop", "--device",
                           "cpu", "--model", "tiny", "--seq-len", "32", "--batch-size", "4",
                           "--steps", "3", "--timing-warmup", "1", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = json.loads(out.read_text())
    assert rec["params"]["implementation"].startswith("reference: hand-written loop")
    assert rec["params"]["seq_len"] == 32 and rec["params"]["global_batch_size"] == 4
    assert rec["metrics"]["measured_steps"] == 2
    assert rec["verdict"]["status"] == "PASS"
    home = tmp_path / "home"
    add = subprocess.run([sys.executable, "-m", "toolkit.cli", "results", "add", str(out),
                          "--db", str(tmp_path / "r.db")], cwd=REPO,
                         env={**env, "PCTK_HOME": str(home)}, capture_output=True, text=True,
                         timeout=120, check=False)
    assert add.returncode == 0, add.stdout + add.stderr
    assert "added fsdp" in add.stdout
