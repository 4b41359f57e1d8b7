"""The twin follows its config before it starts anything: a config `pctk config check` rejects
is refused (exit 2, nothing stopped), accounting follows SlurmSettings/Database, a cluster is
found by the name the user wrote, a mistyped preset is named. Real files, no twin started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from toolkit.cli import main
from toolkit.local import clusters, state

VALID = """\
Region: us-east-1
Image: {Os: ubuntu2204}
HeadNode: {InstanceType: c5.4xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}
Scheduling:
  Scheduler: slurm
  SlurmQueues:
    - Name: cpu
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      ComputeResources:
        - {Name: c5, InstanceType: c5.4xlarge, MinCount: MIN, MaxCount: 2}
"""


def _config(folder: Path, name: str, min_count: int) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(VALID.replace("MIN", str(min_count)))
    return path


def test_local_up_refuses_what_config_check_rejects_before_touching_anything(tmp_path, capsys):
    bad = _config(tmp_path, "nc-p4d", 4)  # MinCount 4 > MaxCount 2
    root = tmp_path / "twins"
    code = main(["local", "up", "--config", str(bad), "--state-dir", str(root)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert f"`pctk config check` rejects {bad}" in err
    assert "MinCount: Max count must be greater than or equal to min count" in err
    assert "nothing was started or stopped" in err and "--force" in err
    assert not root.exists()  # no state folder, no daemon: nothing was done


def test_the_library_refuses_too(tmp_path):
    import pytest

    from toolkit.errors import PctkError
    from toolkit.local.twin import Twin

    with pytest.raises(PctkError, match="rejects"):
        Twin(tmp_path / "s").up(_config(tmp_path, "c", 4))
    with pytest.raises(PctkError, match="rejects"):
        clusters.up(_config(tmp_path, "c", 4), tmp_path / "root")
    assert not (tmp_path / "s").exists() and not (tmp_path / "root").exists()


def _fake_twin(root: Path, cluster: str) -> Path:
    folder = root / cluster
    folder.mkdir(parents=True)
    state.save(folder, state.TwinState(config="/c/x.yaml", cluster=cluster))
    return folder


def test_cluster_is_found_by_the_name_the_user_wrote(tmp_path):
    folder = _fake_twin(tmp_path, "nc_p4d")  # Slurm's name for nc-p4d
    assert state.select(tmp_path, "nc-p4d") == folder
    assert state.select(tmp_path, "nc_p4d") == folder
    assert clusters.select(tmp_path, "nc-p4d").state_dir == folder
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "status", "--json",
                        "--state-dir", str(tmp_path), "--cluster", "nc-p4d"],
                       capture_output=True, text=True)
    assert r.returncode == 3, r.stderr  # found, stopped
    assert json.loads(r.stdout)["cluster"] == "nc_p4d"


def test_config_show_names_the_presets_for_a_mistyped_one(capsys):
    code = main(["config", "show", "p5-trainin"])
    err = capsys.readouterr().err
    assert code == 2
    assert "no such file" not in err
    assert "did you mean p5-training" in err and "g5-dev" in err
