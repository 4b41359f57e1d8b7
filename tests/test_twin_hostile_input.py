"""User input cannot add settings to the twin's files: escaped in comments, else refused.

The running-twin side (a twin brought up from a hostile folder) is in
tests/twin/test_hostile_input.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.config.model import load_topology
from toolkit.errors import PctkError
from toolkit.local import hosts, mariadb
from toolkit.local.plan import Ports, TwinNode, build_plan
from toolkit.local.render import render_gres_conf, render_slurm_conf, render_slurmdbd_conf

PORTS = Ports(6817, 6819, 3306, 6900)
# a folder name that ends slurm.conf's first comment line and sets MailProg (run as root)
HOSTILE_DIR = "x\nMailProg=/tmp/pctk-evil-mail #\"q' =1\r\u2028\\"


def _config(folder: Path, queue: str = "compute", cr: str = "c5",
            itype: str = "c5.4xlarge", settings: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "hostile.yaml"
    custom = f"  SlurmSettings:\n    CustomSlurmSettings:\n{settings}" if settings else ""
    cfg.write_text(
        "Scheduling:\n"
        "  Scheduler: slurm\n"
        f"{custom}"
        "  SlurmQueues:\n"
        f"    - Name: {queue}\n"
        "      ComputeResources:\n"
        f"        - {{Name: {cr}, InstanceType: {itype}, MinCount: 1, MaxCount: 2}}\n")
    return cfg


def _plan(cfg: Path, state: Path = Path("/var/lib/pctk/twin")):
    return build_plan(load_topology(cfg), state, PORTS, hostname="h", host=(2, 4096),
                      user="slurm", host_address="127.0.0.1", node_addresses=True)


def _settings_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_a_hostile_config_folder_stays_inside_the_comment(tmp_path):
    cfg = _config(tmp_path / HOSTILE_DIR)
    plan = _plan(cfg)
    conf = render_slurm_conf(plan)
    lines = conf.splitlines()
    assert lines[0].startswith("# Local twin of ") and "MailProg" in lines[0]
    assert "\\n" in lines[0] and "\\r" in lines[0] and "\\u2028" in lines[0]
    assert lines[1].startswith("# ")
    assert not any(ln.lstrip().startswith("MailProg") for ln in lines)
    # every other file is free of it too
    for text in (render_gres_conf(plan), render_slurmdbd_conf(plan, "0" * 32)):
        assert "MailProg" not in text


@pytest.mark.parametrize("value", [
    '"10 MailProg=/tmp/pctk-evil-mail"',  # a blank separates two settings on one line
    '"10 #"', '"10\\\\"', '"\\"10\\""', '"10\\tMailProg=/x"', '"10\\u2028"',
])
def test_custom_settings_that_would_add_a_setting_are_refused(tmp_path, value):
    cfg = _config(tmp_path, settings=f"      - MaxArraySize: {value}\n")
    with pytest.raises(PctkError, match="CustomSlurmSettings") as err:
        _plan(cfg)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("field, bad", [
    ("cr", '"c5\\nMailProg=/tmp/pctk-evil-mail\\n#"'),
    ("cr", '"c5 CPUs=999"'),
    ("cr", '"c5,compute-st-x"'),
    ("itype", '"c5.4xlarge State=DOWN"'),
    ("itype", '"c5.4xlarge\\nMailProg=/tmp/pctk-evil-mail"'),
])
def test_names_that_would_break_a_node_line_are_refused(tmp_path, field, bad):
    cfg = _config(tmp_path, **{field: bad})
    with pytest.raises(PctkError) as err:
        _plan(cfg)
    assert "cannot be written into the twin's Slurm files" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_queue_name_with_a_trailing_newline_is_refused(tmp_path):
    # `$` in a regex matches before a final newline: the name rule must hold for all of it
    with pytest.raises(PctkError, match="not a valid queue name"):
        load_topology(_config(tmp_path, queue='"compute\\n"'))


def test_a_custom_setting_key_with_a_trailing_newline_is_refused(tmp_path):
    with pytest.raises(PctkError, match=r"not a slurm\.conf parameter name"):
        load_topology(_config(tmp_path, settings='      - {"MaxArraySize\\n": 10}\n'))


@pytest.mark.parametrize("state", [
    "/tmp/a MailProg=/tmp/pctk-evil-mail",  # StateSaveLocation=/tmp/a MailProg=...
    "/tmp/a\nMailProg=/tmp/pctk-evil-mail",
    "/tmp/a#b", "/tmp/a%h", "/tmp/a[1-2]", "/tmp/a,b", "/tmp/a:b", "/tmp/a\"b",
])
def test_a_state_folder_that_slurm_conf_cannot_hold_is_refused(tmp_path, state):
    with pytest.raises(PctkError, match="the twin's state folder") as err:
        _plan(_config(tmp_path), Path(state))
    assert "\n" not in str(err.value)


def test_a_plain_state_folder_is_accepted(tmp_path):
    plan = _plan(_config(tmp_path), Path("/home/ann.lee/.local/state/pctk-2/twin+x@y~z"))
    assert "StateSaveLocation=/home/ann.lee/.local/state/pctk-2/twin+x@y~z/ctld/state" in \
        render_slurm_conf(plan)


def test_hosts_block_markers_stay_one_line_each():
    node = TwinNode("q-st-c-1", "q", "c5.4xlarge", "c", True, 1, 256, None, 0, (), 6900,
                    "127.0.26.244")
    block = hosts.block(Path("/tmp/x\n10.9.9.9 evil.example"), [node])
    assert block[0].startswith("# BEGIN pctk twin /tmp/x\\n") and block[-1].startswith("# END")
    assert not any(ln.startswith("10.9.9.9") for ln in block)
    # the same markers strip the block again
    assert hosts.strip_block(Path("/tmp/x\n10.9.9.9 evil.example"), ["a", *block, "b"]) == \
        ["a", "b"]


def test_only_pctk_made_database_passwords_reach_sql(tmp_path):
    with pytest.raises(PctkError, match="password"):
        mariadb.setup_sql("x'; DROP DATABASE mysql; --")
    pw_file = tmp_path / "mysql" / "slurm.password"
    pw_file.parent.mkdir()
    pw_file.write_text("x'; GRANT ALL ON *.* TO 'slurm'@'%'; --\n")
    made = mariadb.password(tmp_path)
    assert len(made) == 32 and int(made, 16) >= 0
    assert pw_file.read_text().strip() == made
    assert f"IDENTIFIED BY '{made}'" in mariadb.setup_sql(made)


@pytest.mark.parametrize("level", ["queue", "compute resource"])
def test_queue_and_resource_custom_settings_that_would_add_a_setting_are_refused(tmp_path,
                                                                               level):
    # ParallelCluster puts a queue's CustomSlurmSettings on its PartitionName line and a
    # compute resource's on its NodeName line: a blank there adds an attribute
    cfg = tmp_path / "hostile.yaml"
    bad = '{MaxTime: "10 AllowAccounts=root"}'
    queue_custom = f"      CustomSlurmSettings: {bad}\n" if level == "queue" else ""
    cr_custom = f", CustomSlurmSettings: {bad}" if level != "queue" else ""
    cfg.write_text(
        "Scheduling:\n"
        "  Scheduler: slurm\n"
        "  SlurmQueues:\n"
        "    - Name: compute\n"
        f"{queue_custom}"
        "      ComputeResources:\n"
        "        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 1, MaxCount: 2"
        f"{cr_custom}}}\n")
    with pytest.raises(PctkError, match="CustomSlurmSettings") as err:
        text = render_slurm_conf(_plan(cfg))
        pytest.fail(f"rendered: {[ln for ln in text.splitlines() if 'AllowAccounts' in ln]}")
    assert "\n" not in str(err.value)
