"""``pctk config new`` checks what it renders: a spec that renders a config ``check`` rejects
writes nothing and exits 1; an instance type outside the catalog is refused with the nearest
catalog types."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolkit.cli import main
from toolkit.paths import presets_dir

Spec = dict[str, Any]
SPEC = presets_dir() / "specs" / "p5-training.yaml"
OLD = "# an earlier, valid config\n"


def cpu(spec: Spec) -> Spec:
    return spec["queues"][1]["compute_resources"][0]


def write_spec(tmp_path: Path, mutate: Callable[[Spec], None]) -> Path:
    spec = yaml.safe_load(SPEC.read_text())
    mutate(spec)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def min_gt_max(spec: Spec) -> None:
    cpu(spec)["min_count"] = 9


def bad_subnet(spec: Spec) -> None:
    spec["queues"][1]["subnet_ids"] = ["subnet-123"]


@pytest.mark.parametrize(("mutate", "words"), [
    (min_gt_max, "Max count must be greater than or equal to min count"),
    (bad_subnet, "String does not match expected pattern"),
])
def test_new_writes_nothing_that_check_rejects(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               mutate: Callable[[Spec], None],
                                               words: str) -> None:
    spec = write_spec(tmp_path, mutate)
    out = tmp_path / "cluster.yaml"
    out.write_text(OLD)
    assert main(["config", "new", "--spec", str(spec), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert words in err
    assert f"{out}: not written" in err
    assert out.read_text() == OLD


def test_new_keep_invalid_writes_and_still_fails(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, min_gt_max)
    out = tmp_path / "cluster.yaml"
    assert main(["config", "new", "--spec", str(spec), "-o", str(out), "--keep-invalid"]) == 1
    assert "written anyway" in capsys.readouterr().err
    assert main(["config", "check", str(out)]) == 1


def test_new_to_stdout_prints_no_yaml_when_check_fails(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "new", "--spec", str(write_spec(tmp_path, min_gt_max))]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "not written" in captured.err


def test_new_json_says_whether_it_wrote(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cluster.yaml"
    spec = write_spec(tmp_path, min_gt_max)
    assert main(["config", "new", "--spec", str(spec), "-o", str(out), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["written"] is False and result["check"]["valid"] is False
    assert main(["config", "new", "--spec", str(SPEC), "-o", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["written"] is True and result["check"]["valid"] is True


def test_instance_type_typo_is_refused_with_the_nearest_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, lambda s: s["queues"][0]["compute_resources"][0].update(
        instance_type="p5.48xlarg"))
    out = tmp_path / "cluster.yaml"
    assert main(["config", "new", "--spec", str(spec), "-o", str(out)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "'p5.48xlarg' is not in the pctk catalog" in line
    assert "did you mean p5.48xlarge" in line
    assert not out.exists()


def test_unknown_type_can_be_allowed_and_check_still_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, lambda s: cpu(s).update(instance_type="c7i.large"))
    out = tmp_path / "cluster.yaml"
    assert main(["config", "new", "--spec", str(spec), "-o", str(out)]) == 2
    capsys.readouterr()
    assert main(["config", "new", "--spec", str(spec), "-o", str(out),
                 "--allow-unknown-types"]) == 0
    err = capsys.readouterr().err
    assert "instance type c7i.large is not in the pctk catalog" in err
    assert f"wrote {out}" in err
    assert yaml.safe_load(out.read_text())["Scheduling"]["SlurmQueues"][1][
        "ComputeResources"][0]["InstanceType"] == "c7i.large"
