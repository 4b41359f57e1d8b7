"""A twin brought up from hostile input: nothing the user wrote becomes a Slurm setting.

With a config in a folder named ``x<newline>MailProg=<program> #``, slurm.conf's first
comment line used to end at the newline: slurmctld took the MailProg and ran it as root for
a job asking for mail. Renderer-level cases: tests/test_twin_hostile_input.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from toolkit.local.twin import Twin

pytestmark = pytest.mark.twin

REPO = Path(__file__).resolve().parents[2]


def _config(folder: Path, custom: str = "") -> Path:
    folder.mkdir(parents=True)
    cfg = folder / "hostile.yaml"
    settings = f"  SlurmSettings:\n    CustomSlurmSettings:\n{custom}" if custom else ""
    cfg.write_text(  # a config `pctk config check` accepts: the twin checks it first
        "Region: us-east-1\n"
        "Image: {Os: ubuntu2204}\n"
        "HeadNode: {InstanceType: c5.4xlarge, Networking: {SubnetId: subnet-0123456789abcdef0}}\n"
        "Scheduling:\n"
        "  Scheduler: slurm\n"
        f"{settings}"
        "  SlurmQueues:\n"
        "    - Name: compute\n"
        "      Networking: {SubnetIds: [subnet-0123456789abcdef0]}\n"
        "      ComputeResources:\n"
        "        - {Name: c5, InstanceType: c5.4xlarge, MinCount: 1, MaxCount: 1}\n")
    return cfg


def _mail_program(tmp: Path) -> tuple[Path, Path]:
    """A program that leaves a mark when slurmctld runs it."""
    mark = tmp / "mail-ran"
    prog = tmp / "evil-mail"
    prog.write_text(f"#!/bin/sh\nid > {mark}\n")
    prog.chmod(0o755)
    return prog, mark


def test_a_twin_from_a_hostile_folder_takes_no_injected_setting(tmp_path):
    prog, mark = _mail_program(tmp_path)
    cfg = _config(tmp_path / f"x\nMailProg={prog} #\"q' =1\\")
    state = Path(tempfile.mkdtemp(prefix="pctk-hi-", dir="/tmp"))
    twin = Twin(state)
    try:
        st = twin.up(cfg, nodes=1, accounting=False, timeout=120)
        assert st.running
        conf = twin.slurm_conf.read_text()
        assert not [ln for ln in conf.splitlines() if ln.lstrip().startswith("MailProg")]
        assert str(prog) in conf.splitlines()[0]  # shown, escaped, in the comment
        env = {**os.environ, **twin.env()}
        shown = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                               env=env, timeout=60, check=True).stdout
        mail = [ln for ln in shown.splitlines() if ln.startswith("MailProg")]
        assert mail and str(prog) not in mail[0], mail
        # a job asking for mail: slurmctld runs its MailProg (the default, not ours)
        job = subprocess.run(["sbatch", "--wait", "-p", "compute", "--mail-type=ALL",
                              "--mail-user=root", f"--output={tmp_path}/job.out", "--wrap",
                              "true"], capture_output=True, text=True, env=env, timeout=120,
                             cwd=tmp_path)
        assert job.returncode == 0, job.stderr
        time.sleep(1)
        assert not mark.exists(), mark.read_text()
    finally:
        twin.down(purge=True)


def test_a_custom_setting_that_would_add_another_is_refused_before_any_daemon(tmp_path):
    prog, _ = _mail_program(tmp_path)
    cfg = _config(tmp_path / "cfg", custom=f'      - MaxArraySize: "1001 MailProg={prog}"\n')
    state = Path(tempfile.mkdtemp(prefix="pctk-hi-", dir="/tmp"))
    try:
        r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "up", "-c", str(cfg),
                            "--no-accounting", "--state-dir", str(state)],
                           capture_output=True, text=True, timeout=120, cwd=REPO)
        assert r.returncode == 2, r.stderr
        (line,) = r.stderr.strip().splitlines()[-1:]
        assert "Traceback" not in r.stderr
        assert "CustomSlurmSettings MaxArraySize" in line and "one word" in line
        assert not list(state.rglob("slurm.conf"))
        assert not Twin(state / "hostile").any_daemon_up()
    finally:
        Twin(state / "hostile").down(purge=True)
        Twin(state).down(purge=True)


@pytest.mark.parametrize(("var", "value"), [
    ("PCTK_TWIN_PORT_BASE", "abc"), ("PCTK_TWIN_PORT_BASE", "80"),
    ("PCTK_TWIN_PORT_BASE", "65531"),  # one node, 4 ports: the last start that fits is 65530
    ("PCTK_TWIN_FIRST_JOB_ID", "12;id"),
])
def test_a_bad_port_base_or_first_job_id_is_refused_before_anything_is_written(tmp_path, var,
                                                                               value):
    # a port base that is not a number used to be ignored (the twin took other ports)
    cfg = _config(tmp_path / "cfg")
    state = tmp_path / "state"
    try:
        r = subprocess.run([sys.executable, "-m", "toolkit.cli", "local", "up", "-c", str(cfg),
                            "--no-accounting", "--state-dir", str(state)],
                           capture_output=True, text=True, timeout=120, cwd=REPO,
                           env={**os.environ, var: value})
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr
        assert f"{var}={value!r}" in r.stderr and "unset it" in r.stderr, r.stderr
        # nothing but the lock that `local up` takes first
        assert [f.name for f in state.rglob("*")] in ([], [".up.lock"])
    finally:
        Twin(state / "hostile").down(purge=True)
