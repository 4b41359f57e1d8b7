"""faults.json has one reader and writer (toolkit/local/faultfile.py): edits from several
processes at once are all kept, and a node's new slurmd finds its slow-cpu fault there."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from toolkit.local import faultfile


def _add_keys(state_dir: str, who: int, n: int) -> None:
    for i in range(n):
        with faultfile.faults(Path(state_dir)) as data:
            data.setdefault("keys", []).append(f"{who}-{i}")


def test_edits_from_concurrent_processes_are_all_kept(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_add_keys, args=(str(tmp_path), w, 20)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
        assert p.exitcode == 0
    keys = faultfile.read(tmp_path)["keys"]
    assert sorted(keys) == sorted(f"{w}-{i}" for w in range(4) for i in range(20))


def test_read_of_a_missing_or_broken_file_is_empty(tmp_path: Path) -> None:
    assert faultfile.read(tmp_path) == {}
    (tmp_path / faultfile.FAULTS).write_text("[1, 2")
    assert faultfile.read(tmp_path) == {}
    assert faultfile.read(tmp_path / "absent") == {}


def test_a_new_slurmd_joins_its_nodes_slow_cpu_group_only(tmp_path: Path) -> None:
    group = tmp_path / "cg"
    group.mkdir()
    with faultfile.faults(tmp_path) as data:
        data["slow-cpu"] = {"node": "n1", "cgroup": str(group)}
    faultfile.follow_new_slurmd(tmp_path, "n2", 111)
    assert not (group / "cgroup.procs").exists()
    faultfile.follow_new_slurmd(tmp_path, "n1", 222)
    assert (group / "cgroup.procs").read_text() == "222\n"
    assert json.loads((tmp_path / faultfile.FAULTS).read_text())["slow-cpu"]["node"] == "n1"
