"""FSDP2 on 4 gloo ranks computes what one unsharded process computes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from benchmarks.fsdp.model import Transformer, preset
from tests.fsdp.fsdp_launch import TINY, run_ranks, unsharded_reference

STEPS = 4


@pytest.mark.parametrize(("flags", "mesh"), [
    ([], {"shape": [4], "dims": ["dp_shard"]}),
    (["--hsdp", "--ac"], {"shape": [2, 2], "dims": ["dp_replicate", "dp_shard"]}),
], ids=["fsdp", "hsdp-2x2-ac"])
def test_four_ranks_match_one_unsharded_process(tmp_path: Path, flags: list[str],
                                                mesh: dict) -> None:
    ckpt = tmp_path / "ckpt"
    run = run_ranks(4, [*TINY, "--steps", str(STEPS), "--ckpt-dir", str(ckpt),
                        "--ckpt-every", str(STEPS), *flags], tmp_path / "record.json",
                    ranks_per_node=2)
    assert run.returncodes == [0] * 4, run.output
    assert run.record["params"]["world_size"] == 4
    assert run.record["params"]["mesh"] == mesh

    ref_losses, ref_params = unsharded_reference(STEPS)
    fsdp_losses = [run.losses()[s] for s in range(1, STEPS + 1)]
    torch.testing.assert_close(fsdp_losses, ref_losses, rtol=1e-5, atol=1e-5)

    # the DCP checkpoint holds the full (unsharded) parameters after STEPS steps
    dcp_to_torch_save(ckpt / f"step-{STEPS:08d}", tmp_path / "full.pt")
    saved = torch.load(tmp_path / "full.pt", weights_only=False)["model"]
    assert saved.keys() == ref_params.keys()
    for name, ref in ref_params.items():
        torch.testing.assert_close(saved[name], ref, rtol=1e-5, atol=1e-5, msg=name)
    # training moved the weights: the comparison is not between two initial states
    torch.manual_seed(0)
    initial = Transformer(preset("tiny")).state_dict()
    assert not torch.equal(initial["layers.0.attention.wq.weight"],
                           saved["layers.0.attention.wq.weight"])
