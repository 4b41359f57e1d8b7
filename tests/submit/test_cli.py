"""pctk submit / jobs / logs / cancel on the twin, hostile strings included."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.twinutil import STALE_LAUNCHER
from toolkit.cli import main

pytestmark = pytest.mark.twin

HOSTILE = ['a "quoted" arg', "$HOME", "x; rm -rf /tmp/never", "two\nlines", "it's", "`id`", ""]


@pytest.fixture()
def jobs_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PCTK_JOBS_DIR", str(tmp_path / "jobs"))
    return tmp_path / "jobs"


def _pctk(*args: str) -> tuple[int, str, str]:
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", *args], capture_output=True,
                       text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def test_arguments_and_job_name_reach_the_program_verbatim(twin, jobs_home, tmp_path):
    out = tmp_path / "args.json"
    prog = "import json,sys; json.dump(sys.argv[1:], open(sys.argv[1], 'w'))"
    name = 'we"ird $USER; name'
    code, stdout, err = _pctk("submit", "-q", "cpu", "--wait", "--json", "-J", name, "--",
                              sys.executable, "-c", prog, str(out), *HOSTILE)
    assert code == 0, err
    info = json.loads(stdout)
    assert info["states"] == {info["job_ids"][0]: "COMPLETED"}
    assert json.loads(out.read_text()) == [str(out), *HOSTILE]
    assert not Path("/tmp/never").exists()
    shown = twin.cmd("scontrol", "show", "job", info["job_ids"][0]).stdout
    assert f"JobName={name}\n" in shown


def test_multi_node_command_runs_srun_across_nodes_with_master_addr(twin, jobs_home,
                                                                    monkeypatch):
    # submitted from a shell a torchrun session left RANK, MASTER_ADDR... in: the tasks see
    # this job's first node, and no stale rank
    for k, v in STALE_LAUNCHER.items():
        monkeypatch.setenv(k, v)
    code, stdout, err = _pctk("submit", "-q", "cpu", "-N", "3", "--wait", "--json", "--",
                              "bash", "-c", 'echo "$SLURM_PROCID $SLURMD_NODENAME $MASTER_ADDR '
                              '${RANK-none} ${WORLD_SIZE-none}"')
    assert code == 0, err
    job_id = json.loads(stdout)["job_ids"][0]
    lines = sorted(p.read_text().strip() for p in jobs_home.glob(f"*/{job_id}.*.out")
                   if ".batch." not in p.name)
    assert lines == [f"{i} cpu-dy-c5-{i + 1} cpu-dy-c5-1 none none" for i in range(3)]
    # pctk logs shows one task's output
    rc = subprocess.run([sys.executable, "-m", "toolkit.cli", "logs", job_id, "--task", "2"],
                        capture_output=True, text=True)
    assert "2 cpu-dy-c5-3 cpu-dy-c5-1" in rc.stdout


def test_failed_task_makes_wait_exit_1(twin, jobs_home, capsys):
    code = main(["submit", "-q", "cpu", "--array", "0-2", "--wait", "--",
                 "bash", "-c", 'exit $(( SLURM_ARRAY_TASK_ID == 1 ))'])
    assert code == 1
    assert "1 of 3 task(s) did not complete" in capsys.readouterr().err


def test_jobs_lists_my_jobs_from_sacct(twin, jobs_home, capsys):
    assert main(["submit", "-q", "cpu", "--wait", "-J", "listed-job", "--", "true"]) == 0
    capsys.readouterr()
    # slurmdbd lists a job by time window a moment after the job ends
    deadline = time.monotonic() + 20
    while True:
        assert main(["jobs", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        mine = [j for j in data["jobs"] if j["JobName"] == "listed-job"]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert data["source"] == "sacct"
    assert mine and mine[-1]["State"] == "COMPLETED" and mine[-1]["ExitCode"] == "0:0"


def test_jobs_lists_names_with_a_bar_and_a_newline_whole(twin, jobs_home, capsys):
    # job names reach Slurm verbatim; `|` and a newline in one must not split sacct's rows
    name = "a|b\nc"
    assert main(["submit", "-q", "cpu", "--wait", "-J", name, "--", "true"]) == 0
    capsys.readouterr()
    deadline = time.monotonic() + 20
    while True:
        assert main(["jobs", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        mine = [j for j in data["jobs"] if j["JobName"] == name]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert data["source"] == "sacct" and mine, [j["JobName"] for j in data["jobs"]]
    assert mine[-1]["State"] == "COMPLETED" and mine[-1]["ExitCode"] == "0:0"
    assert all(set(j) == set(data["jobs"][0]) and j["JobID"].split("_")[0].isdigit()
               for j in data["jobs"])
    assert main(["jobs"]) == 0
    assert "a|b\\nc" in capsys.readouterr().out  # the table shows the newline as \n


def _queued_named(twin, name: str) -> list[str]:
    return twin.cmd("squeue", "-h", "-n", name, "-o", "%i").stdout.split()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_cancel_and_ctrl_c_while_waiting_leaves_the_job_running(twin, jobs_home, stop):
    """Ctrl-C, and SIGTERM (a service manager, a batch system; its default was a silent exit
    143), stop the waiting, not the job: exit 130 naming the job left running."""
    name = f"{stop.name.lower()}-{os.getpid()}-{time.monotonic_ns()}"
    p = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "submit", "-q", "cpu", "--wait",
                          "-J", name, "--", "sleep", "120"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # Ctrl-C once it waits (a fixed 4 s was still the start-up on a busy host: exit 130 then
    # said nothing)
    deadline = time.monotonic() + 60
    while not _queued_named(twin, name):
        assert time.monotonic() < deadline and p.poll() is None, "the job was never submitted"
        time.sleep(0.2)
    time.sleep(1)
    p.send_signal(stop)
    stdout, stderr = p.communicate(timeout=30)
    assert p.returncode == 130, stderr
    job_id = stdout.split()[1]
    twin.assert_left_running(job_id, stderr)
    code, _out, _ = _pctk("cancel", job_id)
    assert code == 0
    assert twin.wait(job_id, timeout=60).startswith("CANCELLED")


_STALLED = """
import sys, time
import toolkit.submit.cli as sc
from toolkit.cli import main

submit = sc.submit_command

def stalled(*args, **kwargs):  # a Ctrl-C before the job is submitted, or before its wait
    if sys.argv[1] == "before":
        print("stalled", flush=True)
        time.sleep(120)
    sub = submit(*args, **kwargs)
    print("stalled", flush=True)
    time.sleep(120)
    return sub

sc.submit_command = stalled
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_ctrl_c_no_command_handles_says_so_and_names_the_jobs_left_running(twin, jobs_home,
                                                                            when):
    # typer >= 0.16 turns a Ctrl-C that reaches it into a silent exit 130
    name = f"stall-{os.getpid()}-{time.monotonic_ns()}"
    p = subprocess.Popen([sys.executable, "-c", _STALLED, when, "submit", "-q", "cpu", "--wait",
                          "-J", name, "--", "sleep", "120"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "stalled\n"
        queued = _queued_named(twin, name)
        p.send_signal(signal.SIGINT)
        _, stderr = p.communicate(timeout=60)
        assert p.returncode == 130, stderr
        if when == "before":
            assert queued == [] and stderr.splitlines() == ["pctk: interrupted"], stderr
        else:
            [job_id] = queued
            assert len(stderr.splitlines()) == 1, stderr
            twin.assert_left_running(job_id, stderr)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for j in _queued_named(twin, name):
            twin.cmd("scancel", j)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-q", "nope", "--", "true"], "the queues in"),
        (["-q", "gpu", "-G", "9", "--", "true"], "has 8 GPUs per node; 9 were asked for"),
        (["-q", "cpu", "--array", "5-1", "--", "true"], "the range is empty"),
        (["-q", "cpu", "--time", "soon", "--", "true"], "bad --time"),
        (["-q", "cpu"], "no command given"),
        (["-q", "cpu", "-N", "99", "--", "true"], "at most 8 nodes"),
        (["--fn", "no_such_module:f"], "cannot load no_such_module:f"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(twin, jobs_home, args, message):
    code, _, err = _pctk("submit", *args)
    assert code == 2, err
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_fn_runs_a_module_function(twin, jobs_home, tmp_path, monkeypatch):
    mod = tmp_path / "pctk_fn_example.py"
    mod.write_text("def shout(word):\n    import os\n"
                   "    return word.upper() + '@' + os.environ['SLURM_JOB_PARTITION']\n")
    monkeypatch.chdir(tmp_path)
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "submit", "-q", "cpu", "--wait",
                        "--fn", "pctk_fn_example:shout", "--", "hi"], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "HI@cpu"


def test_logs_follow_prints_until_the_job_ends(twin, jobs_home):
    code, stdout, err = _pctk("submit", "-q", "cpu", "--json", "--",
                              "bash", "-c", "for i in 1 2 3; do echo line$i; sleep 1; done")
    assert code == 0, err
    job_id = json.loads(stdout)["job_ids"][0]
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "logs", job_id, "--task", "0",
                        "--follow"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("line")] == \
        ["line1", "line2", "line3"]


def test_job_files_are_private_to_their_owner(twin, monkeypatch):
    # a jobs folder other users could enter (pytest's tmp_path is private already)
    base = Path(tempfile.mkdtemp(prefix="pctk-jobs-open-", dir="/tmp"))
    base.chmod(0o755)
    monkeypatch.setenv("PCTK_JOBS_DIR", str(base))
    try:
        _check_private_job_files()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _check_private_job_files() -> None:
    code, stdout, err = _pctk("submit", "-q", "cpu", "--wait", "--json", "--", "echo", "hi")
    assert code == 0, err
    info = json.loads(stdout)
    folder = Path(info["folder"])
    assert folder.stat().st_mode & 0o777 == 0o700 & ~_umask()
    script = folder / "job.sh"
    assert script.stat().st_mode & 0o777 == 0o700  # the owner still runs it
    assert (folder / "job.json").stat().st_mode & 0o777 == 0o600
    log = next(folder.glob(f"{info['job_ids'][0]}.0.out"))
    assert log.read_text().strip() == "hi"
    if os.geteuid() == 0:
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        for path in (log, script, folder / "job.json"):
            r = subprocess.run([*nobody, "cat", str(path)], capture_output=True, cwd="/")
            assert r.returncode != 0, f"another user read {path.name}"


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def test_a_controller_that_does_not_answer_is_said_so_not_blamed_on_options(twin, jobs_home,
                                                                          tmp_path):
    # the twin's own configuration, its controller moved to a port where nothing listens (as
    # after slurmctld was killed); MessageTimeout 2 s so sbatch gives up soon
    etc = tmp_path / "etc"
    shutil.copytree(Path(twin.env["SLURM_CONF"]).parent, etc, ignore=shutil.ignore_patterns(
        "*.sock", "*.socket"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    conf = etc / "slurm.conf"
    text = conf.read_text()
    moved = re.sub(r"^MessageTimeout=\d+$", "MessageTimeout=2", re.sub(
        r"^SlurmctldPort=\d+$", f"SlurmctldPort={closed}", text, flags=re.M), flags=re.M)
    assert moved.count(f"SlurmctldPort={closed}\n") == 1 and "MessageTimeout=2\n" in moved
    conf.write_text(moved)
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "submit", "-c", twin.config,
                        "-q", "cpu", "--wait", "--", "true"], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "SLURM_CONF": str(conf)})
    assert r.returncode == 2
    assert r.stderr.startswith("pctk: error: the Slurm controller (slurmctld) is not "
                               "answering: "), r.stderr
    assert r.stderr.rstrip().endswith("; fix: check the controller with `pctk local status` "
                                      "(the twin) or `sinfo` (a cluster), then submit again")
    assert "--queue" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
