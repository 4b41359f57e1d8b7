"""How many nodes the twin gets, and its stand-ins for shared storage (real folders)."""

from __future__ import annotations

from pathlib import Path

from toolkit.config.model import load_topology
from toolkit.local import mounts
from toolkit.local.plan import MAX_TWIN_NODES, Ports, build_plan, machine_cap, mount_dirs
from toolkit.paths import preset_path

PORTS = Ports(6817, 6819, 3306, 6900)


def _config(tmp: Path, counts: dict[str, int], storage: str = "") -> Path:
    queues = "".join(
        f"    - Name: {q}\n"
        "      Networking: {SubnetIds: [subnet-1]}\n"
        "      ComputeResources:\n"
        f"        - {{Name: c5, InstanceType: c5.4xlarge, MinCount: 0, MaxCount: {n}}}\n"
        for q, n in counts.items())
    cfg = tmp / "mine.yaml"
    cfg.write_text("Region: us-east-1\nScheduling:\n  Scheduler: slurm\n  SlurmQueues:\n"
                   + queues + storage)
    return cfg


def _plan(cfg: Path, nodes: int | None = None):
    return build_plan(load_topology(cfg), Path("/tmp/x"), PORTS, nodes_per_resource=nodes,
                      hostname="h", host=(2, 4096), user="u", host_address="127.0.0.1")


def test_default_is_the_configs_node_counts(tmp_path):
    plan = _plan(_config(tmp_path, {"train": 8, "dev": 2}))
    assert dict(plan.partitions) == {
        "train": tuple(f"train-dy-c5-{i}" for i in range(1, 9)),
        "dev": ("dev-dy-c5-1", "dev-dy-c5-2"),
    }
    assert not [n for n in plan.notes if n.startswith("capped")]


def test_too_many_nodes_are_cut_down_evenly_and_said(tmp_path):
    cfg = _config(tmp_path, {"big": 100, "mid": 40, "small": 3})
    plan = _plan(cfg)
    sizes = {p: len(m) for p, m in plan.partitions}
    assert sum(sizes.values()) <= MAX_TWIN_NODES
    assert sizes["small"] == 3 and sizes["big"] == sizes["mid"] > 3
    assert machine_cap(load_topology(cfg)) == sizes["big"]
    capped = [n for n in plan.notes if n.startswith("capped")]
    assert len(capped) == 2
    assert f"big/c5 has {sizes['big']} of its 100 nodes" in capped[0]
    assert f"at most {MAX_TWIN_NODES} twin nodes" in capped[0]


def test_mount_dirs_come_from_shared_storage():
    assert mount_dirs(load_topology(preset_path("p5-training"))) == ["/fsx", "/home"]


def test_a_missing_mount_dir_becomes_a_stand_in_removed_when_no_twin_uses_it(tmp_path):
    fsx = tmp_path / "fsx"
    real = tmp_path / "data"
    real.mkdir()
    (real / "dataset.bin").write_bytes(b"x")
    a, b = tmp_path / "twin-a", tmp_path / "twin-b"
    recs = mounts.prepare([str(fsx), str(real)], a)
    assert [r["kind"] for r in recs] == ["standin", "existing"]
    assert fsx.is_dir()
    (fsx / "ckpt").write_text("written by a job")
    assert mounts.prepare([str(fsx)], b)[0]["kind"] == "standin"  # shared by both twins
    assert mounts.release(recs, a) == []
    assert (fsx / "ckpt").exists()
    assert mounts.release(recs, b) == [str(fsx)]
    assert not fsx.exists()
    assert (real / "dataset.bin").read_bytes() == b"x"  # never touched


def test_a_mount_dir_that_cannot_be_created_is_said_missing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    rec = mounts.prepare([str(blocker / "fsx")], tmp_path / "twin")[0]
    assert rec["kind"] == "missing" and "cannot create" in rec["note"]


def test_cpu_types_get_their_vcpus_and_an_unknown_type_is_a_note_not_a_refusal(tmp_path):
    cfg = _config(tmp_path, {"work": 2})
    cfg.write_text(cfg.read_text().replace("c5.4xlarge", "c5.2xlarge").replace(
        "    - Name: work\n", "    - Name: new\n      Networking: {SubnetIds: [subnet-1]}\n"
        "      ComputeResources:\n        - {Name: c8i, InstanceType: c8i.4xlarge, "
        "MinCount: 0, MaxCount: 1}\n    - Name: work\n"))
    plan = _plan(cfg)
    by_name = {n.name: n for n in plan.nodes}
    assert by_name["work-dy-c5-1"].cpus == 2  # min(8 vCPUs of c5.2xlarge, the host's 2)
    assert by_name["new-dy-c8i-1"].gres is None
    assert "c8i.4xlarge: facts unknown (not in the pctk catalog): no GRES, host CPUs used" \
        in plan.notes
