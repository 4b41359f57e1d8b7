"""The driver's checks before anything is submitted (no Slurm needed for these)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.bench.storage import driver as drv
from toolkit.errors import PctkError


def job(tmp_path: Path, **kw: object) -> drv.StorageJob:
    (tmp_path / "fsx").mkdir(exist_ok=True)  # the shared file system's mount
    return drv.StorageJob(**{"nodes": 2, "target": str(tmp_path / "fsx" / "bench"),
                             "run_dir": tmp_path / "run", **kw})  # type: ignore[arg-type]


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
    assert node[node.index("--target") + 1] == str(tmp_path / "fsx" / "bench")
    assert "--no-direct" in node
    assert node[node.index("--block-sizes") + 1] == "1M"


def test_a_torn_refusal_note_still_refuses_and_names_its_node(tmp_path):
    """srun --kill-on-bad-exit stops the other ranks when one refuses: a rank stopped while
    writing its note (before notes were written whole) left an empty file, and the driver
    failed on it with a JSON traceback instead of the refusal."""
    from benchmarks.storage.node import refuse
    from toolkit.bench.storage.driver import refusals

    assert refuse(tmp_path, "cpu-dy-c5-1", "not shared between the nodes") == 3
    (tmp_path / "refused-cpu-dy-c5-2.json").write_text("")  # torn
    assert refusals(tmp_path) == [
        "cpu-dy-c5-1: not shared between the nodes",
        f"cpu-dy-c5-2: refused (its note is unreadable: {tmp_path / 'refused-cpu-dy-c5-2.json'})"]
    # written whole: no temporary file left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refused-cpu-dy-c5-1.json",
                                                          "refused-cpu-dy-c5-2.json"]


def test_a_target_the_nodes_would_make_at_the_top_of_the_root_disk_is_refused(
        tmp_path: Path) -> None:
    """A mistyped target (`/fxs/bench`) used to be made under / on every node: the run
    benchmarked, and filled, the root disk and reported it as the shared file system."""
    for typo in ("/pctk-no-such-mount/bench", "/pctk-no-such-mount/%n/bench"):
        with pytest.raises(PctkError, match="would make it at the top of /"):
            drv.validate(job(tmp_path, target=typo))
        assert not Path("/pctk-no-such-mount").exists()
    # a new folder under an existing one is the benchmark's to make, per node too
    for fine in (tmp_path / "fsx" / "new" / "deeper", tmp_path / "fsx" / "%n" / "x"):
        drv.validate(job(tmp_path, target=str(fine)))
