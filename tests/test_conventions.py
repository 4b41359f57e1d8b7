"""One set of conventions: one state root, one spelling of output flags, preset names
wherever a config is read, progress lines off a terminal, and benchmark results stored as
they finish (the Slurm-free commands here; the twin runs are in
tests/results/test_autostore_twin.py)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.record import read_record
from toolkit import paths
from toolkit.cli import main
from toolkit.progress import ProgressLines

REPO = Path(__file__).resolve().parents[1]
CODE = "import sys; from toolkit.cli import main; sys.exit(main(sys.argv[1:]))"
# a fixture in the checkout: these tests run (and can fail) in every clone
NCCL_LOG = (REPO / "tests" / "nccl" / "fixtures"
            / "13_nccl-tests-331-sendrecv-a100-nthread2-info.log")


def _pctk(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CODE, *argv], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    import os

    base = {k: v for k, v in os.environ.items()
            if k not in ("PCTK_RESULTS_DB", "PCTK_JOBS_DIR", "PCTK_TWIN_DIR")}
    (tmp_path / "home").mkdir()
    return {**base, "HOME": str(tmp_path / "home"), "PCTK_HOME": str(tmp_path / "state")}


def test_pctk_home_governs_every_default_path(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("PCTK_TWIN_DIR", "PCTK_JOBS_DIR", "PCTK_RESULTS_DB"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PCTK_HOME", str(tmp_path))
    from toolkit.results.store import default_db_path
    from toolkit.submit.command import jobs_dir

    assert paths.twin_dir() == tmp_path / "twin"
    assert jobs_dir() == paths.jobs_dir() == tmp_path / "jobs"
    assert default_db_path() == paths.results_db() == tmp_path / "results.db"
    assert paths.health_dir() == tmp_path / "health"
    assert paths.new_run_dir("fsdp-tiny").parent == tmp_path / "runs"
    # a specific variable still wins over the root
    monkeypatch.setenv("PCTK_JOBS_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("PCTK_RESULTS_DB", str(tmp_path / "team.db"))
    assert paths.jobs_dir() == tmp_path / "elsewhere"
    assert paths.results_db() == tmp_path / "team.db"


def test_nccl_parse_stores_its_record_and_log(tmp_path: Path, env: dict[str, str]) -> None:
    res = _pctk(env, "bench", "nccl", "parse", str(NCCL_LOG), "--json")
    assert res.returncode == 0, res.stderr
    rid = json.loads(res.stdout)["id"]
    shown = _pctk(env, "results", "show", rid, "--json")
    assert shown.returncode == 0, shown.stderr
    assert [log["name"] for log in json.loads(shown.stdout)["stored_logs"]] == [NCCL_LOG.name]
    assert (tmp_path / "state" / "results.db").is_file()
    assert not (tmp_path / "home" / ".local").exists()


def test_the_same_log_parsed_twice_is_stored_once(tmp_path: Path, env: dict[str, str]) -> None:
    # each parse makes a record with a new id; the log's content (sha256) is what is stored
    # once: a second parse says which result holds it, and trends see one run, not two
    first = _pctk(env, "bench", "nccl", "parse", str(NCCL_LOG), "--json")
    rid = json.loads(first.stdout)["id"]
    again = _pctk(env, "bench", "nccl", "parse", str(NCCL_LOG), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["id"] != rid
    assert f"already stored as {rid}" in again.stderr, again.stderr
    listed = _pctk(env, "results", "list", "--json")
    assert [r["id"] for r in json.loads(listed.stdout)] == [rid], listed.stdout
    copy = tmp_path / "renamed.log"  # the same content under another name: the same run
    copy.write_bytes(NCCL_LOG.read_bytes())
    added = _pctk(env, "bench", "nccl", "parse", str(copy))
    assert f"already stored as {rid}" in added.stderr, added.stderr


def test_no_store_and_a_failing_store_keep_the_result(tmp_path: Path,
                                                      env: dict[str, str]) -> None:
    res = _pctk(env, "bench", "nccl", "parse", str(NCCL_LOG), "--no-store")
    assert res.returncode == 0 and "stored" not in res.stderr
    assert not (tmp_path / "state").exists()
    # a database that cannot be created: one warning, the record and exit code unaffected
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    out = tmp_path / "r.json"
    res = _pctk({**env, "PCTK_RESULTS_DB": str(blocker / "results.db")}, "bench", "nccl",
                "parse", str(NCCL_LOG), "-o", str(out), "--json")
    assert res.returncode == 0
    assert json.loads(res.stdout)["id"] == read_record(out)["id"]
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("pctk: warning:")]
    assert len(warnings) == 1 and "not stored" in warnings[0], res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("preset", ["p5-training", "g5-dev.yaml"])
def test_config_show_takes_a_preset_name(preset: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # no file of that name here: the preset is meant
    assert main(["config", "show", preset, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["resources"]


def test_config_diff_and_check_take_preset_names(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["config", "diff", "p5-training", "p5-training"]) == 0
    assert capsys.readouterr().out == "no semantic differences\n"
    assert main(["config", "diff", "p5-training", "g5-dev", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["changes"]
    # an existing file of that name wins over the preset; a missing one is still an error
    (tmp_path / "g5-dev").write_text("not: [a config\n")
    assert main(["config", "show", "g5-dev"]) == 2
    assert main(["config", "show", "no-such-config"]) == 2
    assert "no-such-config" in capsys.readouterr().err


def test_output_file_is_dash_o_or_out_old_spelling_still_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = paths.presets_dir() / "specs" / "g5-dev.yaml"
    assert main(["config", "new", "--spec", str(spec), "--out", str(tmp_path / "a.yaml")]) == 0
    assert main(["config", "new", "--spec", str(spec), "-o", str(tmp_path / "b.yaml")]) == 0
    capsys.readouterr()
    assert main(["config", "new", "--spec", str(spec), "--output",
                 str(tmp_path / "c.yaml")]) == 0
    assert "--output is deprecated here; use --out" in capsys.readouterr().err
    texts = {(tmp_path / f"{n}.yaml").read_text() for n in "abc"}
    assert len(texts) == 1
    assert main(["config", "upgrade", str(tmp_path / "a.yaml"), "--output",
                 str(tmp_path / "d.yaml")]) == 0
    assert (tmp_path / "d.yaml").is_file()
    assert main(["config", "upgrade", str(tmp_path / "a.yaml"), "-o", str(tmp_path / "e.yaml"),
                 "--output", str(tmp_path / "f.yaml")]) == 2
    capsys.readouterr()
    assert main(["config", "upgrade", "--help"]) == 0
    assert "--output" not in capsys.readouterr().out  # the old spelling is hidden
    assert main(["report", "-o", str(tmp_path / "r.html"), "--db",
                 str(tmp_path / "r.db")]) == 0
    assert (tmp_path / "r.html").stat().st_size > 0


def test_run_folder_is_run_dir_and_the_old_out_still_works(
        capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["bench", "collectives", "--help"], ["bench", "nccl", "run", "--help"],
                 ["bench", "fsdp", "--help"]):
        assert main(argv) == 0
        help_text = capsys.readouterr().out
        assert "--run-dir" in help_text and "--out" not in help_text, argv
        assert "--no-store" in help_text
    code = main(["bench", "collectives", "--run-dir", "/tmp/a", "--out", "/tmp/b",
                 "--from-record", "/nonexistent"])
    assert code == 2
    assert "--run-dir and --out both given" in capsys.readouterr().err


def test_progress_is_plain_lines_off_a_terminal() -> None:
    stream = io.StringIO()
    with ProgressLines("bench fsdp", stream=stream, heartbeat_s=3600) as progress:
        progress.update("job 7: PENDING")
        progress.update("job 7: PENDING")  # unchanged: no new line until the heartbeat
        progress.update("job 7: RUNNING")
    lines = stream.getvalue().splitlines()
    assert [ln.split(" ", 1)[1].rsplit(" (", 1)[0] for ln in lines] == [
        "bench fsdp: job 7: PENDING", "bench fsdp: job 7: RUNNING"]
    with ProgressLines("x", stream=stream, heartbeat_s=0) as progress:
        progress.update("same")
        progress.update("same")  # the heartbeat repeats it, so a log shows it is alive
    assert stream.getvalue().count("x: same") == 2
    quiet = io.StringIO()
    with ProgressLines("x", stream=quiet, quiet=True) as progress:
        progress.update("nothing")
    assert quiet.getvalue() == ""
