"""Results keep themselves, on the twin's real Slurm: a benchmark or health run stores its
record (and the raw logs in its run folder) in the results database as it finishes, under
one state root (PCTK_HOME), printing plain progress lines when its output is not a terminal.

Each command runs as a separate process with its own HOME and PCTK_HOME, output to pipes,
the way a script or a CI job runs it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.record import read_record

from .readonly import read_only_argv

pytestmark = pytest.mark.twin

REPO = Path(__file__).resolve().parents[2]
CODE = "import sys; from toolkit.cli import main; sys.exit(main(sys.argv[1:]))"


def _env(twin: Any, tmp_path: Path) -> dict[str, str]:
    env = dict(twin.env)
    env.pop("PCTK_RESULTS_DB", None)
    env.update(HOME=str(tmp_path / "home"), PCTK_HOME=str(tmp_path / "state"))
    (tmp_path / "home").mkdir()
    return env


def _pctk(env: dict[str, str], *argv: str, timeout: float = 300
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CODE, *argv], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=timeout)


def _listed(env: dict[str, str]) -> list[dict[str, Any]]:
    res = _pctk(env, "results", "list", "--json")
    assert res.returncode == 0, res.stderr
    return list(json.loads(res.stdout))


def _stored_logs(env: dict[str, str], rid: str) -> list[str]:
    res = _pctk(env, "results", "show", rid, "--json")
    assert res.returncode == 0, res.stderr
    return [log["name"] for log in json.loads(res.stdout)["stored_logs"]]


def test_bench_collectives_is_stored_without_results_add(twin: Any, tmp_path: Path) -> None:
    env = _env(twin, tmp_path)
    res = _pctk(env, "bench", "collectives", "--nodes", "2", "--partition", "cpu",
                "--min-bytes", "1K", "--max-bytes", "8K", "--iters", "2", "--warmup", "1",
                "--timeout", "240", "--json")
    assert res.returncode == 0, res.stderr
    rec = json.loads(res.stdout)
    # the default run folder is under PCTK_HOME, and nothing went to ~/.local/state
    run_dirs = list((tmp_path / "state" / "runs").glob("collectives-*"))
    assert len(run_dirs) == 1 and read_record(run_dirs[0] / "record.json")["id"] == rec["id"]
    assert not (tmp_path / "home" / ".local").exists()
    # stored as it finished, with the job's log from the run folder
    assert [r["id"] for r in _listed(env)] == [rec["id"]]
    assert f"stored collectives result {rec['id']}" in res.stderr
    assert any(n.startswith("slurm-") and n.endswith(".out")
               for n in _stored_logs(env, rec["id"]))
    # not a terminal: the wait showed up as plain progress lines on stderr
    assert "bench collectives: job " in res.stderr


def test_health_run_writes_and_stores_under_pctk_home(twin: Any, tmp_path: Path) -> None:
    env = _env(twin, tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    res = _pctk(env, "health", "run", "--partition", "cpu", "--mount", str(mnt),
                "-o", str(tmp_path / "copy.json"), "--json", timeout=200)
    assert res.returncode == 0, res.stderr
    rec = json.loads(res.stdout)
    (run_dir,) = (tmp_path / "state" / "health").iterdir()
    assert read_record(run_dir / "record.json")["id"] == rec["id"]
    # the -o copy is the same result, so a later `results add copy.json` adds nothing new
    assert read_record(tmp_path / "copy.json")["id"] == rec["id"]
    assert not (tmp_path / "home" / ".local").exists()
    assert [r["id"] for r in _listed(env)] == [rec["id"]]
    assert "health sweep: " in res.stderr
    added = _pctk(env, "results", "add", str(tmp_path / "copy.json"), "--json")
    assert json.loads(added.stdout)["added"][0]["new"] is False


def test_bench_fsdp_is_stored_with_its_job_log(twin: Any, tmp_path: Path) -> None:
    env = _env(twin, tmp_path)
    run_dir = tmp_path / "fsdp"
    res = _pctk(env, "bench", "fsdp", "--model", "tiny", "--nodes", "1", "--tasks-per-node",
                "1", "--gpus-per-node", "0", "--partition", "cpu", "--steps", "3",
                "--run-dir", str(run_dir), "--timeout", "180")
    assert res.returncode == 0, res.stderr
    rec = read_record(run_dir / "record.json")
    assert [r["id"] for r in _listed(env)] == [rec["id"]]
    assert rec["raw_logs"] and all(n.startswith("slurm-") for n in rec["raw_logs"])
    assert _stored_logs(env, rec["id"]) == rec["raw_logs"]
    assert "bench fsdp: job " in res.stderr
    assert not (tmp_path / "home" / ".local").exists()


def test_no_store_leaves_the_database_alone(twin: Any, tmp_path: Path) -> None:
    env = _env(twin, tmp_path)
    res = _pctk(env, "bench", "collectives", "--nodes", "1", "--partition", "cpu",
                "--ops", "all_reduce", "--min-bytes", "1K", "--max-bytes", "2K", "--iters",
                "1", "--warmup", "1", "--run-dir", str(tmp_path / "run"), "--no-store")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "run" / "record.json").is_file()
    assert not (tmp_path / "state" / "results.db").exists()
    assert "stored" not in res.stderr


def test_submit_wait_prints_progress_lines_when_not_on_a_terminal(twin: Any,
                                                                  tmp_path: Path) -> None:
    env = _env(twin, tmp_path)
    res = _pctk(env, "submit", "-q", "cpu", "--wait", "--", "sleep", "3", timeout=120)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if " waiting: " in ln]
    assert lines and lines[-1].split(" waiting: ")[1].startswith("1/1 jobs done: completed=1")
    assert not (tmp_path / "home" / ".local").exists()
    assert list((tmp_path / "state" / "jobs").iterdir())  # job scripts under PCTK_HOME


def test_health_run_dir_names_the_run_folder(twin: Any, tmp_path: Path) -> None:
    env = _env(twin, tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    run_dir = tmp_path / "hrun"
    res = _pctk(env, "health", "run", "--partition", "cpu", "--mount", str(mnt), "--run-dir",
                str(run_dir), "--json", timeout=200)
    assert res.returncode == 0, res.stderr
    rec = read_record(run_dir / "record.json")
    assert rec["id"] == json.loads(res.stdout)["id"]
    assert [r["id"] for r in _listed(env)] == [rec["id"]]
    assert not (tmp_path / "state" / "health").exists()
    again = _pctk(env, "health", "run", "--partition", "cpu", "--run-dir", str(run_dir))
    assert again.returncode == 3
    assert again.stderr.startswith("pctk: error: run folder ") and "not empty" in again.stderr


def test_bench_scaling_keeps_its_study_when_the_store_is_read_only(twin: Any,
                                                                   tmp_path: Path) -> None:
    """The store on a read-only mount: every size ran, so the study (scaling.json), its
    plots and each size's record are in the run folder, the exit code is the verdict's, and
    one warning says where the records are and the `pctk results add` that stores them."""
    env = _env(twin, tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    db = store / "results.db"
    env["PCTK_RESULTS_DB"] = str(db)
    assert _pctk(env, "results", "list").returncode == 0  # an existing, empty database
    run_dir = tmp_path / "scaling"
    res = subprocess.run(read_only_argv(
        store, sys.executable, "-c", CODE, "bench", "scaling", "--nodes", "1,2", "--model",
        "tiny", "--partition", "cpu", "--tasks-per-node", "1", "--gpus-per-node", "0",
        "--steps", "5", "--run-dir", str(run_dir), "--timeout", "400", "--json"),
        capture_output=True, text=True, cwd=REPO, env=env, timeout=500)
    assert res.returncode in (0, 1) and res.stdout, res.stderr
    out = json.loads(res.stdout)
    study = read_record(run_dir / "scaling.json")
    assert study["id"] == out["record"]["id"] and study["params"]["nodes"] == [1, 2]
    assert res.returncode == (1 if study["verdict"]["status"] == "FAIL" else 0)
    assert sorted(Path(p).name for p in out["plots"]) == ["scaling-breakdown.png",
                                                         "scaling-efficiency.png"]
    assert all(Path(p).parent == run_dir and Path(p).stat().st_size > 1000
               for p in out["plots"])
    records = [run_dir / "nodes-1" / "record.json", run_dir / "nodes-2" / "record.json",
               run_dir / "scaling.json"]
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("pctk: warning:")]
    assert len(warnings) == 1, res.stderr
    assert warnings[0].startswith(f"pctk: warning: not stored in the results database ({db}: "
                                  "cannot write the results database (the file: Read-only "
                                  f"file system)"), warnings[0]
    assert f"the 3 records are in {run_dir}: store them later with `pctk results add " \
        in warnings[0]
    command = warnings[0].rsplit("`pctk results add ", 1)[1].rstrip("`")
    assert [Path(p) for p in shlex.split(command)] == records
    assert _listed(env) == []
    # the hint works where the database can be written
    added = _pctk(env, "results", "add", *shlex.split(command))
    assert added.returncode == 0, added.stderr
    assert sorted(r["id"] for r in _listed(env)) == sorted(read_record(p)["id"]
                                                           for p in records)
