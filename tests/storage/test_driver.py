"""The driver's checks before anything is submitted (no Slurm needed for these)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.bench.storage import driver as drv
from toolkit.errors import PctkError


def job(tmp_path: Path, **kw: object) -> drv.StorageJob:
    return drv.StorageJob(**{"nodes": 2, "target": "/fsx/bench", "run_dir": tmp_path / "run",
                             **kw})  # type: ignore[arg-type]


def test_a_run_folder_holding_a_previous_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "record.json").write_text("{}")
    with pytest.raises(PctkError, match="already holds a run"):
        drv.run_storage(job(tmp_path))


@pytest.mark.parametrize("kw, message", [
    ({"nodes": 0}, "--nodes must be at least 1"),
    ({"size_mib": 0}, "--size-mib must be at least 1"),
    ({"target": "fsx/bench"}, "not an absolute path"),
    ({"phases": "seq,metadata"}, "unknown phase"),
    ({"block_sizes": "1M,fast"}, "--block-sizes: block size 'fast'"),
    ({"block_sizes": "1M,3M", "size_mib": 6, "ckpt_mib": 4},
     "block size 3M does not divide --ckpt-mib 4"),
])
def test_bad_input_is_refused_before_submission(tmp_path: Path, kw: dict, message: str
                                                ) -> None:
    with pytest.raises(PctkError, match=message):
        drv.validate(job(tmp_path, **kw))


def test_sbatch_arguments_name_the_script_and_pass_the_node_flags(tmp_path: Path) -> None:
    args = job(tmp_path, partition="cpu", direct=False).sbatch_args()
    assert "--nodes=2" in args and "--ntasks-per-node=1" in args
    assert "--partition=cpu" in args
    script = args.index(str(drv.SBATCH_SCRIPT))
    node = args[script + 1:]
    assert node[node.index("--target") + 1] == "/fsx/bench"
    assert "--no-direct" in node
    assert node[node.index("--block-sizes") + 1] == "1M"
