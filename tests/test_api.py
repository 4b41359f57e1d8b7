"""pctk from Python (``toolkit.api``) as a researcher uses it: a fresh interpreter with no
SLURM_CONF finds the running twin by itself, runs a scaling study, stores every record in the
results database and plans from one of them; an interrupt while it waits names the job that
keeps running; bad options are one-line errors before anything is submitted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.twinutil import TwinHandle
from toolkit.results.store import ResultStore

REPO = Path(__file__).resolve().parents[1]
CPU = ("partition='cpu', tasks_per_node=1, gpus_per_node=0, model='tiny'")


def _fresh_env(twin: TwinHandle, db: Path) -> dict[str, str]:
    """The twin's environment without SLURM_CONF: a new kernel of a user who never ran
    `pctk local env`; the twin is found under PCTK_TWIN_DIR, as under the default home."""
    env = {k: v for k, v in twin.env.items() if k != "SLURM_CONF"}
    assert env.get("PCTK_TWIN_DIR"), "the session twin's environment names its folder"
    env.update(PCTK_RESULTS_DB=str(db), PYTHONPATH=str(REPO))
    return env


def _python(code: str, env: dict[str, str], cwd: Path, timeout: float = 900
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def test_a_fresh_interpreter_runs_a_study_stores_it_and_plans_from_it(
        twin: TwinHandle, tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    run_dir = tmp_path / "study"
    code = f"""
        import json
        from toolkit import api
        study = api.scaling_study([1, 2], {CPU}, steps=8, run_dir={str(run_dir)!r},
                                  timeout=600, progress=False)
        plan = api.plan(model="8b", tokens="1T", nodes=4,
                        from_record=[study.sizes[-1]["id"]])
        print(json.dumps({{
            "kind": study.record["kind"], "verdict": study.record["verdict"]["status"],
            "bottleneck": study.record["metrics"]["bottleneck"], "missing": study.missing,
            "plots": [str(p) for p in study.plots], "stored": [i.id for i in study.stored],
            "record_path": str(study.record_path), "plan_nodes": plan["nodes"],
            "mfu_source": plan["inputs"]["mfu"]["source"], "notes": plan["notes"]}}))
    """
    r = _python(code, _fresh_env(twin, db), tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["kind"] == "scaling" and out["missing"] == []
    assert out["bottleneck"] == "twin-shared-cpu"
    assert Path(out["record_path"]).is_file()
    assert out["plots"] and all(Path(p).stat().st_size > 1000 for p in out["plots"])
    # each size's record and the study's, stored as the CLI stores them
    assert len(out["stored"]) == 3
    with ResultStore(db, writer=False) as store:
        kinds = sorted(r["kind"] for r in store.list(limit=10))
    assert kinds == ["fsdp", "fsdp", "scaling"]
    # the plan read the record, and set its twin MFU aside, saying so
    assert out["plan_nodes"] == 4
    assert out["mfu_source"].startswith("planning default")
    assert any("local twin" in n for n in out["notes"]), out["notes"]


def test_an_interrupt_names_the_job_that_keeps_running(twin: TwinHandle, tmp_path: Path
                                                       ) -> None:
    code = f"""
        from toolkit import api
        try:
            api.bench_fsdp(1, {CPU}, steps=100000, time_limit="10:00",
                           run_dir={str(tmp_path / 'fsdp')!r}, progress=False)
        except api.StoppedWaiting as stop:
            print("STOPPED", " ".join(stop.job_ids), "|", stop)
    """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                            env=_fresh_env(twin, tmp_path / "results.db"), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job_id = ""
    try:
        deadline = time.monotonic() + 120
        while not job_id and time.monotonic() < deadline:
            q = twin.cmd("squeue", "-h", "-o", "%i %j %T", check=False).stdout.split("\n")
            job_id = next((line.split()[0] for line in q
                           if "pctk-fsdp-tiny" in line and "RUNNING" in line), "")
            time.sleep(0.5)
        assert job_id, "the benchmark's job never ran"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        line = next(x for x in out.splitlines() if x.startswith("STOPPED"))
        assert line.startswith(f"STOPPED {job_id} |"), line
        assert f"job {job_id} keeps running. Cancel with: pctk cancel {job_id}" in line
        # it does keep running: the interrupt stopped the waiting, not the job
        state = twin.cmd("squeue", "-h", "-j", job_id, "-o", "%T", check=False).stdout
        assert state.strip() in ("RUNNING", "COMPLETING"), state
    finally:
        twin.clean_up(proc, job_id)


@pytest.mark.parametrize(("call", "message"), [
    ("api.bench_fsdp(1, modle='tiny')", "unknown training option(s): modle"),
    # a TrainConfig field the driver does not pass to the nodes
    ("api.bench_fsdp(1, weight_decay=0.1)", "unknown training option(s): weight_decay"),
    ("api.scaling_study('1,x', model='tiny')", "is not a list of node counts"),
    ("api.plan(model='70b', tokens='lots')", "--tokens 'lots' is not a number"),
])
def test_bad_options_are_one_line_errors_before_anything_runs(
        twin: TwinHandle, tmp_path: Path, call: str, message: str) -> None:
    code = f"""
        from toolkit import api
        try:
            {call}
        except api.PctkError as exc:
            print("ERROR", exc.one_line())
    """
    before = twin.cmd("squeue", "-h", "-o", "%i").stdout.split()
    r = _python(code, _fresh_env(twin, tmp_path / "results.db"), tmp_path, timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert message in r.stdout, r.stdout
    assert not set(twin.cmd("squeue", "-h", "-o", "%i").stdout.split()) - set(before)
    assert not (tmp_path / "results.db").exists()
    assert os.environ.get("SLURM_CONF")  # the test's own environment kept its twin
