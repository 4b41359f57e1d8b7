"""pctk config check end to end: YAML, placeholders, offline schema, drift, upgrade, CLI."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolkit.cli import main
from toolkit.config.check import check_text
from toolkit.config.drift import apply_upgrade
from toolkit.config.findings import Level
from toolkit.config.schema import check_schema
from toolkit.errors import PctkError
from toolkit.paths import preset_path

REPO = Path(__file__).resolve().parents[2]

P5 = preset_path("p5-training")
LOGIN = """LoginNodes:
  Pools:
    - Name: login
      InstanceType: c5.4xlarge
      Count: 1
      Networking:
        SubnetIds: [subnet-0123456789abcdef1]
      Ssh:
        KeyName: old-key  # keep this comment
"""


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def line_of(text: str, stripped: str) -> int:
    return [line.strip() for line in text.splitlines()].index(stripped) + 1


def test_yaml_syntax_error_names_line_and_column() -> None:
    report = check_text("Region: us-east-1\nImage:\n  Os: [ubuntu2204\n", "bad.yaml")
    assert report.exit_code == 2
    (f,) = report.findings
    assert f.stage == "yaml" and f.line == 4 and f.column is not None
    assert "YAML syntax error" in f.message


@pytest.mark.parametrize("text", [
    "a: !!python/object/apply:os.system ['true']\n",
    "x: " + "[" * 100 + "]" * 100 + "\n",
    "a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 10)}]\n"
        for i in range(8)),
])
def test_hostile_yaml_is_refused(text: str) -> None:
    report = check_text(text, "evil.yaml")
    assert report.exit_code == 2
    assert report.findings[0].stage == "yaml"


def test_huge_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# pad\n" * 1_000_000)
    assert main(["config", "check", str(big)]) == 2
    assert "larger than" in capsys.readouterr().err


def test_placeholders_filled_and_unresolved(base: dict[str, Any]) -> None:
    base["HeadNode"]["Networking"]["SubnetId"] = "${HEAD_SUBNET}"
    base["Scheduling"]["SlurmQueues"][1]["ComputeResources"][0]["MaxCount"] = "${CPU_NODES}"
    text = dump(base)
    filled = check_text(text, "t.yaml", {"HEAD_SUBNET": "subnet-0123456789abcdef0",
                                         "CPU_NODES": "8"}, environ={})
    assert filled.exit_code == 0, filled.findings
    assert filled.data["Scheduling"]["SlurmQueues"][1]["ComputeResources"][0]["MaxCount"] == 8
    missing = check_text(text, "t.yaml", environ={"CPU_NODES": "8"})
    (f,) = missing.findings  # the schema's pattern error on the placeholder is not repeated
    assert f.code == "unresolved-placeholder" and "HEAD_SUBNET" in f.message
    assert f.path_str == "HeadNode.Networking.SubnetId"
    assert f.line == line_of(text, "SubnetId: ${HEAD_SUBNET}")


def test_schema_errors_map_to_path_and_line(base: dict[str, Any]) -> None:
    base["Scheduling"]["SlurmQueues"][1]["ComputeResources"][0]["MinCout"] = 1
    base["Scheduling"]["SlurmQueues"][1]["ComputeResources"][0]["MaxCount"] = "many"
    text = dump(base)
    report = check_text(text, "t.yaml", environ={})
    schema = {f.path_str: f for f in report.findings if f.stage == "schema"}
    cr = "Scheduling.SlurmQueues[1].ComputeResources[0]"
    assert schema[f"{cr}.MinCout"].message == "Unknown field."
    assert schema[f"{cr}.MinCout"].line == line_of(text, "MinCout: 1")
    assert "integer" in schema[f"{cr}.MaxCount"].message
    assert report.exit_code == 1


def test_queue_without_compute_resources_is_a_finding_not_a_traceback(
        base: dict[str, Any]) -> None:
    del base["Scheduling"]["SlurmQueues"][1]["ComputeResources"]
    report = check_text(dump(base), "t.yaml", environ={})
    paths = [f.path_str for f in report.findings if f.level is Level.ERROR]
    assert "Scheduling.SlurmQueues[1].ComputeResources" in paths
    assert report.exit_code == 1


@pytest.mark.parametrize("data", [[1, 2], "text", {"Scheduling": {"SlurmQueues": ["x"]}},
                                  {"Image": None, "HeadNode": [], "Scheduling": 5}])
def test_malformed_shapes_give_findings(data: Any) -> None:
    report = check_text(dump(data), "t.yaml", environ={})
    assert report.exit_code == 1 and report.errors


def test_schema_runs_offline_without_credentials(monkeypatch: pytest.MonkeyPatch,
                                                 base: dict[str, Any]) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE",
                "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    attempts: list[Any] = []

    def no_network(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("network blocked by test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert check_schema(base) == []
    base["Image"]["Os"] = "windows"
    assert [f.path_str for f in check_schema(base)] == ["Image.Os"]
    assert attempts == []


def old_config() -> str:
    return P5.read_text().replace("Os: ubuntu2204", "Os: alinux2  # old image") + LOGIN


def test_drift_is_reported_with_version_and_fix() -> None:
    report = check_text(old_config(), "old.yaml", environ={})
    drift = [f for f in report.findings if f.stage == "drift"]
    assert {f.path_str for f in drift} == {"Image.Os", "LoginNodes.Pools[0].Ssh.KeyName"}
    assert all("aws-parallelcluster 3.16" in f.message and f.hint for f in drift)
    assert not [f for f in report.findings if f.stage == "schema"]  # reported once, as drift
    assert report.exit_code == 1


def test_upgrade_rewrites_and_keeps_comments() -> None:
    text, changes = apply_upgrade(old_config(), "old.yaml")
    assert len(changes) == 2
    assert "Os: alinux2023  # old image" in text
    assert "KeyName" not in text.split("LoginNodes:")[1]
    assert "Ssh:" not in text.split("LoginNodes:")[1]
    assert text.startswith("# p5.48xlarge training cluster")
    assert check_text(text, "new.yaml", environ={}).exit_code == 0
    assert apply_upgrade(text)[1] == []


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(P5)]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(P5.read_text().replace("MinCount: 0", "MinCount: 9"))
    assert main(["config", "check", str(bad)]) == 1
    assert main(["config", "check", str(tmp_path / "missing.yaml")]) == 2
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [\n")
    assert main(["config", "check", str(broken)]) == 2
    assert main(["config", "check", str(P5), str(bad)]) == 1
    capsys.readouterr()
    assert main(["config", "check", "--json", str(bad)]) == 1
    out = json.loads(capsys.readouterr().out)
    (finding,) = [f for f in out["files"][0]["findings"] if f["level"] == "ERROR"]
    assert finding["code"] == "ComputeResourceSizeValidator" and finding["line"] is not None
    assert finding["path"] == "Scheduling.SlurmQueues[1].ComputeResources[0].MinCount"
    skipped = {s["validator"]: s["reason"] for s in out["files"][0]["validators"]["skipped"]}
    assert skipped["InstanceTypeValidator"] == "needs AWS data (ec2.list_instance_types)"
    assert "ComputeResourceSizeValidator" in out["files"][0]["validators"]["ran"]
    assert main(["config", "check", "--var", "novalue", str(P5)]) == 2


def test_cli_upgrade_writes_atomically(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(old_config())
    assert main(["config", "upgrade", str(old)]) == 2  # no -o and no --in-place
    assert main(["config", "upgrade", str(old), "--in-place", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {c["path"] for c in out["changes"]} == {"Image.Os", "LoginNodes.Pools[0].Ssh.KeyName"}
    assert main(["config", "check", str(old)]) == 0
    assert not list(tmp_path.glob(".*.tmp"))


def test_cli_new_show_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p5.yaml"
    spec = Path(P5.parent / "specs" / "p5-training.yaml")
    assert main(["config", "new", "--spec", str(spec), "-o", str(out)]) == 0
    assert main(["config", "diff", str(P5), str(out)]) == 0
    capsys.readouterr()
    assert main(["config", "show", "--json", str(P5)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["nodes"] == {"min": 4, "max": 12}
    assert shown["accelerators"] == {"min": 32, "max": 32}
    assert shown["price_usd_per_hour"]["min"] == pytest.approx(4 * 55.04)
    assert shown["price_usd_per_hour"]["max"] == pytest.approx(4 * 55.04 + 8 * 0.68)
    other = tmp_path / "other.yaml"
    data = yaml.safe_load(P5.read_text())
    data["Scheduling"]["SlurmQueues"].reverse()
    data["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["MaxCount"] = 16
    other.write_text(dump(data))
    assert main(["config", "diff", "--json", str(P5), str(other)]) == 1
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert changes == [{"kind": "changed", "old": 8, "new": 16,
                        "path": "Scheduling.SlurmQueues[cpu].ComputeResources[c5].MaxCount"}]
    assert main(["config", "show", str(tmp_path / "nope.yaml")]) == 2


def run_check_cli(*args: str, timeout: float = 60, prefix: tuple[str, ...] = (),
                  command: tuple[str, ...] = ("check",)) -> subprocess.CompletedProcess[str]:
    """``pctk config check`` in a child process, so a hang or a memory blow-up cannot take
    the test session with it."""
    return subprocess.run([*prefix, sys.executable, "-m", "toolkit.cli", "config", *command,
                           *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def assert_one_line_exit_2(proc: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("pctk: error: ") and "Traceback" not in proc.stderr
    for text in expected:
        assert text in line


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "cluster.yaml"
    os.mkfifo(fifo)
    assert_one_line_exit_2(run_check_cli(str(fifo), timeout=30), "not a regular file (a FIFO)")


def test_endless_device_is_refused_without_reading_it() -> None:
    assert_one_line_exit_2(run_check_cli("/dev/zero", timeout=30), "a character device")


def test_reads_stop_at_the_cap_whatever_st_size_says(tmp_path: Path) -> None:
    from toolkit.config.yamlio import read_regular_bytes

    path = tmp_path / "c.yaml"
    path.write_bytes(b"x" * 101)
    assert read_regular_bytes(path, 101) == b"x" * 101
    with pytest.raises(PctkError, match="larger than the 100 bytes"):
        read_regular_bytes(path, 100)


# root reads any file: these capabilities let it. Without them root is held to the mode bits
# like any user, and still runs the interpreter and the package from wherever the clone sits
# (a folder another user, say nobody, could not enter: /root, a mktemp -d folder)
NO_READ_OVERRIDE = ("setpriv", "--inh-caps=-dac_override,-dac_read_search",
                    "--bounding-set=-dac_override,-dac_read_search")


def test_unreadable_file_is_one_line_exit_2() -> None:
    """A file the user may not read; as root, root without its read-anything capabilities."""
    folder = Path(tempfile.mkdtemp(prefix="pctk-unreadable-", dir="/tmp"))
    try:
        secret = folder / "cluster.yaml"
        secret.write_text(P5.read_text())
        secret.chmod(0o000)
        prefix: tuple[str, ...] = ()
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.fail("setpriv is needed to run this check without root's file access")
            prefix = NO_READ_OVERRIDE
        for command in (("check",), ("show",), ("new", "--spec"), ("upgrade", "--in-place")):
            proc = run_check_cli(str(secret), prefix=prefix, command=command)
            assert_one_line_exit_2(proc, str(secret), "cannot read (Permission denied)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_deep_brackets_are_one_line_exit_2(tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 100_000)
    assert_one_line_exit_2(run_check_cli(str(deep)), "nested too deeply")
    report = check_text("x: " + "[" * 100_000, "deep.yaml")
    assert report.exit_code == 2 and report.findings[0].stage == "yaml"
