"""A twin on a built Slurm release (24.11): its daemons, its commands, its jobs, its history.

The release is built once per machine (`pctk local image build 24.11`, which make test starts
beside the suite); here it is built if it is missing. The Slurm-facing tests run on it again through
`make test`'s second leg (tests/conftest.py SLURM_MATRIX).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import session_config
from toolkit import slurm
from toolkit.cli import main
from toolkit.local import slurmimage
from toolkit.local.twin import Twin

pytestmark = pytest.mark.twin

SLURM_DAEMONS = ("slurmctld", "slurmdbd", "slurmd")


def _run(twin: Twin, *argv: str) -> str:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=60,
                       env={**os.environ, **twin.env()})
    assert r.returncode == 0, f"{argv}: {r.stderr}"
    return r.stdout


def _exe(pid: int) -> Path:
    return Path(os.readlink(f"/proc/{pid}/exe"))


def _job(twin: Twin, out: Path, script: str) -> str:
    job = _run(twin, "sbatch", "--parsable", "-p", "cpu", "-N", "1", f"--output={out}",
               "--wrap", script).strip()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = _run(twin, "sacct", "-j", job, "-X", "-n", "-P", "-o", "State").strip()
        if state and not state.startswith(("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")):
            assert state == "COMPLETED", out.read_text() if out.exists() else state
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not end")


def _layer_view(twin: Twin, work: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """What the Slurm layer (toolkit/slurm.py) reads from this release, for jobs that end
    each way, with what differs by nature (job ids, paths, times) taken out."""
    for k, v in twin.env().items():
        monkeypatch.setenv(k, v)
    slurm._ACCOUNTING.clear()
    out = ["-p", "cpu", "-o", str(work / "%j.out")]
    ids = {
        "ok": slurm.sbatch([*out, "--wrap", "true"]),
        "bad": slurm.sbatch([*out, "--wrap", "false"]),
        "array": slurm.sbatch(["-p", "cpu", "-a", "0-1", "-o", str(work / "%A_%a.out"),
                               "--wrap", "true"]),
    }
    held = slurm.controller_jobs(ids.values())
    ended, _ = slurm.wait_jobs([ids["ok"], ids["bad"], f"{ids['array']}_1"], timeout=120)
    nodes = {n: s for n, s in slurm.node_allocations(["cpu-dy-c5-1"]).items()}
    start = slurm.slurmd_start_times(["gpu-st-p5-1"])
    return {
        "accounting": slurm.accounting_available(),
        "states": sorted(ended.values()),
        "sacct": slurm.job_state(ids["bad"]),
        "reason": slurm.job_reason(ids["bad"]),
        "held": held[1] == "" and held[0] is not None,
        "stdout": slurm.job_stdout(ids["ok"]) in (str(work / f"{ids['ok']}.out"), None),
        "max_array": slurm.max_array_size(),
        "nodes": sorted((r["name"], r["partition"], r["state"], r["gres"])
                        for r in slurm.node_details()),
        "partition": slurm.partition_nodes("gpu")[0]["gres"],
        "allocations": {n: a[0] for n, a in nodes.items()},
        "slurmd_started": sorted(start),
        "hostnames": slurm.expand_hostlist("cpu-dy-c5-[1-2]"),
        "queued": slurm.queued_jobs(),
    }


def test_a_twin_on_a_built_release_runs_its_daemons_commands_and_jobs_and_keeps_each_history(
        capsys, monkeypatch):
    image = slurmimage.find("24.11") or slurmimage.build("24.11", lambda _m: None)
    state = Path(tempfile.mkdtemp(prefix="pctk-rel-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="pctk-relj-", dir="/tmp"))
    config = session_config(work)
    twin = Twin(state)
    try:
        st = twin.up(config, nodes=1, accounting=True, slurm_release="24.11")
        assert (st.slurm_version, st.slurm_prefix) == (image.version, str(image.prefix))
        # every Slurm daemon is the release's program; munged and MariaDB are the system's
        by_name = {d["name"].split(":")[0]: d["pid"] for d in st.daemons}
        for name in SLURM_DAEMONS:
            assert _exe(by_name[name]).is_relative_to(image.prefix), name
        assert not _exe(by_name["munged"]).is_relative_to(image.prefix)
        assert _run(twin, "scontrol", "version").split() == ["slurm", image.version]

        # `pctk local env` puts the release first on PATH; `local status` names it
        assert main(["local", "env", "--state-dir", str(state), "--json"]) == 0
        env = json.loads(capsys.readouterr().out)
        assert env["PATH"].startswith(f"{image.prefix}/bin:{image.prefix}/sbin:")
        assert main(["local", "status", "--state-dir", str(state), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["slurm"]["version"] == image.version

        # a job's own Slurm commands and its step (slurmstepd) are the release's too
        out = work / "job.out"
        job = _job(twin, out, "scontrol version; srun --overlap scontrol version; "
                   "readlink /proc/$PPID/exe")
        lines = out.read_text().split("\n")
        assert lines[:2] == [f"slurm {image.version}"] * 2, lines
        assert lines[2] == str(image.prefix / "sbin" / "slurmstepd")

        # what the Slurm layer reads is the same on both releases (taken again on the system's
        # below): `scontrol show job` says TRES= in 22.05 and ReqTRES=/AllocTRES= in 24.11, a
        # node gains ResumeAfterTime, LaunchType leaves the config: nothing pctk reads
        view = _layer_view(twin, work, monkeypatch)
        assert view["states"] == ["COMPLETED", "COMPLETED", "FAILED"], view
        assert view["sacct"] == "FAILED" and view["reason"] == ("FAILED", "NonZeroExitCode")

        # a shell that exported the twin's SLURM_CONF alone (not `pctk local env`): pctk
        # still runs the release's clients (this machine's 22.05 sbatch cannot talk to a 24.11
        # controller), and so does the job it submits
        bare = {k: v for k, v in os.environ.items() if k not in ("PCTK_TWIN_DIR",)}
        bare["PATH"] = slurmimage.path_with(None, os.environ["PATH"])
        bare["SLURM_CONF"] = twin.env()["SLURM_CONF"]
        seen = work / "client.txt"
        r = subprocess.run([str(Path(sys.executable).parent / "pctk"), "submit", "--wait",
                            "-q", "cpu", "--", "bash", "-c", f"scontrol version > {seen}"],
                           capture_output=True, text=True, timeout=300, env=bare)
        assert r.returncode == 0, r.stderr
        assert seen.read_text().split() == ["slurm", image.version]

        # the image cannot be deleted under the running twin
        code = main(["local", "image", "rm", image.series])
        assert code == 2
        assert image.prefix.is_dir()
        capsys.readouterr()

        # back to the system's Slurm: a restart on its own state and accounting database
        st = twin.up(config, nodes=1, accounting=True, slurm_release="system")
        assert st.slurm_prefix is None
        assert not _exe(next(d["pid"] for d in st.daemons if d["name"] == "slurmctld")
                        ).is_relative_to(image.prefix)
        system = _run(twin, "scontrol", "version").split()[1]
        assert system == st.slurm_version != image.version
        assert _run(twin, "sacct", "-j", job, "-X", "-n", "-P", "-o", "State").strip() == ""
        assert _layer_view(twin, work, monkeypatch) == view

        # and to the release again: its job history is where it was left
        twin.up(config, nodes=1, accounting=True, slurm_release="24.11")
        assert _run(twin, "sacct", "-j", job, "-X", "-n", "-P", "-o", "State").strip() \
            == "COMPLETED"
    finally:
        twin.down(purge=True)
