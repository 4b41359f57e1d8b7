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


def test_every_long_benchmark_and_health_command_runs_from_a_fresh_interpreter(
        twin: TwinHandle, tmp_path: Path) -> None:
    """The collectives sweep, the storage and inference benchmarks, the health sweep and the
    slow-node finder from one new interpreter: each finds the twin, writes and stores its
    record as its command does, and says how it went."""
    db = tmp_path / "results.db"
    (tmp_path / "fsx").mkdir()
    code = f"""
        import json
        from toolkit import api
        out = {{}}
        def put(name, res, failed):
            out[name] = {{"kind": res.record["kind"], "path": str(res.record_path),
                          "stored": [i.id for i in res.stored], "failed": failed,
                          "id": res.record["id"]}}
        r = api.bench_collectives(2, partition="cpu", ops="all_reduce,all_gather",
                                  min_bytes="1K", max_bytes="64K", iters=3, warmup=1,
                                  run_dir={str(tmp_path / 'coll')!r}, progress=False)
        put("collectives", r, r.failed)
        out["collectives"]["ops"] = sorted({{run.collective for run in r.detail.runs}})
        r = api.bench_storage(1, target={str(tmp_path / 'fsx')!r}, partition="cpu",
                              jobs_per_node=1, size_mib=2, ckpt_mib=1, rand_seconds=1,
                              meta_files=20, run_dir={str(tmp_path / 'storage')!r},
                              timeout=300, progress=False)
        put("storage", r, r.failed)
        r = api.bench_inference(model="tiny", partition="cpu", gpus_per_node=0,
                                decode_tokens=8, run_dir={str(tmp_path / 'inference')!r},
                                timeout=600, progress=False)
        put("inference", r, r.failed)
        h = api.health_run("cpu-dy-c5-[1-2]", mounts=[{str(tmp_path)!r}],
                           workdir={str(tmp_path / 'health')!r}, progress=False)
        put("health", h, h.exit_code)
        out["health"]["nodes"] = sorted(h.record["metrics"]["nodes"])
        s = api.slow_nodes("cpu-dy-c5-[1-4]", size="1M", iters=5, include_powered_down=True,
                           workdir={str(tmp_path / 'slow')!r}, progress=False)
        put("slow-nodes", s, s.exit_code)
        out["slow-nodes"]["verdicts"] = sorted({{v["verdict"] for v in
                                                 s.result.to_json()["verdicts"]}})
        out["slow-nodes"]["judged"] = [v["node"] for v in s.result.to_json()["verdicts"]]
        out["slow-nodes"]["errors"] = [p.error for p in s.result.pairs if p.error]
        out["slow-nodes"]["partition"] = s.record["cluster"]["partition"]
        print(json.dumps(out))
    """
    r = _python(code, _fresh_env(twin, db), tmp_path, timeout=1500)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    kinds = {"collectives": "collectives", "storage": "storage", "inference": "inference",
             "health": "health", "slow-nodes": "slow-nodes"}
    for name, kind in kinds.items():
        assert out[name]["kind"] == kind, out[name]
        assert Path(out[name]["path"]).is_file(), name
        assert out[name]["stored"] == [out[name]["id"]], name
    assert out["collectives"]["ops"] == ["all_gather", "all_reduce"]
    assert out["health"]["nodes"] == ["cpu-dy-c5-1", "cpu-dy-c5-2"]
    assert out["health"]["failed"] in (0, 1), out["health"]  # Nagios OK or WARNING
    # every pair ran, in the partition the named nodes share (no --partition given), and
    # every node was judged; the exit code says whether one was not OK (how a busy host's
    # pairs are judged is tests/health/test_slownodes_twin.py's)
    sn = out["slow-nodes"]
    assert sn["errors"] == [] and sn["partition"] == "cpu", sn
    assert sorted(sn["judged"]) == [f"cpu-dy-c5-{i}" for i in range(1, 5)], sn
    assert sn["failed"] == (0 if sn["verdicts"] == ["OK"] else 1), sn
    with ResultStore(db, writer=False) as store:
        stored = {r["kind"] for r in store.list(limit=20)}
    assert stored == set(kinds.values())


def test_nccl_tests_from_python_keep_the_log_and_store_the_record(tmp_path: Path) -> None:
    """nccl-tests (the named stand-in binary: the real one needs GPUs) from Python, as
    `pctk bench nccl run --launcher none` runs it."""
    from tests.nccl.test_runner import STANDIN_DIR, _standin_env

    env = {**_standin_env(tmp_path), "PCTK_RESULTS_DB": str(tmp_path / "results.db"),
           "PYTHONPATH": str(REPO)}
    env.pop("SLURM_CONF", None)
    code = f"""
        import json
        from toolkit import api
        r = api.bench_nccl(["all_reduce"], launcher="none", gpus_per_node=1,
                           nccl_tests_dir={str(STANDIN_DIR)!r}, env={{"NCCL_ALGO": "Ring"}},
                           run_dir={str(tmp_path / 'nccl')!r}, progress=False)
        print(json.dumps({{"kind": r.record["kind"], "failed": r.failed,
                          "stored": [i.id for i in r.stored], "id": r.record["id"],
                          "path": str(r.record_path), "rows": len(
                              r.record["metrics"]["collectives"][0]["rows"])}}))
    """
    r = _python(code, env, tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["kind"] == "nccl-tests" and not out["failed"] and out["rows"] == 25
    assert out["stored"] == [out["id"]]
    assert (Path(out["path"]).parent / "all_reduce.log").is_file()
    started = json.loads((tmp_path / "started.json").read_text())
    assert started["env"]["NCCL_ALGO"] == "Ring"  # the extra variable reached the binary


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
