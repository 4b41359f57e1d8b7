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
    assert "'p5.48xlarg' is not an EC2 instance type name" in line
    assert "did you mean p5.48xlarge" in line
    assert not out.exists()


def test_misspelled_type_can_be_allowed_and_check_still_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, lambda s: cpu(s).update(instance_type="c7i.larg"))
    out = tmp_path / "cluster.yaml"
    assert main(["config", "new", "--spec", str(spec), "-o", str(out)]) == 2
    capsys.readouterr()
    assert main(["config", "new", "--spec", str(spec), "-o", str(out),
                 "--allow-unknown-types"]) == 0
    err = capsys.readouterr().err
    assert "instance type c7i.larg is not an EC2 instance type name" in err
    assert f"wrote {out}" in err
    assert yaml.safe_load(out.read_text())["Scheduling"]["SlurmQueues"][1][
        "ComputeResources"][0]["InstanceType"] == "c7i.larg"


def test_well_formed_unknown_type_is_a_warning_not_a_refusal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """c8i.4xlarge is spelled like an EC2 type the catalog does not know yet: rendered, with a
    "facts unknown" warning from the check and a comment in the YAML."""
    spec = write_spec(tmp_path, lambda s: cpu(s).update(instance_type="c8i.4xlarge"))
    out = tmp_path / "cluster.yaml"
    assert main(["config", "new", "--spec", str(spec), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "instance type c8i.4xlarge: facts unknown" in err
    assert f"wrote {out}" in err and "1 warning" in err
    text = out.read_text()
    comment = text.splitlines()[text.splitlines().index("          InstanceType: c8i.4xlarge") - 1]
    assert comment.strip().startswith("# facts unknown")
    assert main(["config", "check", str(out)]) == 0
    assert "c8i.4xlarge: facts unknown" in capsys.readouterr().out


@pytest.mark.parametrize("itype", ["c5.2xlarge", "m5.2xlarge", "c6i.8xlarge", "t3.medium",
                                   "hpc7a.96xlarge", "r7i.metal-48xl", "c7g.4xlarge"])
def test_ordinary_cpu_types_render_without_findings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], itype: str) -> None:
    """`config new` refused c5.2xlarge ("did you mean g5.2xlarge?") before the CPU families
    were in the catalog."""
    spec = write_spec(tmp_path, lambda s: cpu(s).update(instance_type=itype))
    out = tmp_path / "cluster.yaml"
    assert main(["config", "new", "--spec", str(spec), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "unknown-instance-type" not in err and "not in the pctk catalog" not in err
    assert main(["config", "show", str(out)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if itype in line)
    assert "?" not in row or itype.startswith("hpc7a")  # hpc7a has no us-east-1 price


def test_efa_on_a_cpu_type_without_efa_is_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, lambda s: cpu(s).update(instance_type="c5.2xlarge", efa=True))
    out = tmp_path / "cluster.yaml"
    assert main(["config", "new", "--spec", str(spec), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "c5.2xlarge does not support EFA" in err and not out.exists()
    spec = write_spec(tmp_path, lambda s: cpu(s).update(instance_type="c5n.18xlarge", efa=True))
    assert main(["config", "new", "--spec", str(spec), "-o", str(out)]) == 0
