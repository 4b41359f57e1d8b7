"""pctk deletes only what it made: a purge next to a user's folder removes nothing and says
so, and no state root (variable or --state-dir) may be the root, home or a system folder."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.test_state_home import _env as _clean_env
from tests.test_state_home import _pctk
from toolkit.local import state

REPO = Path(__file__).resolve().parent.parent


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No state variable or twin of the caller's; a home and a state root of the test's."""
    env = {k: v for k, v in _clean_env(tmp_path).items() if k != "SLURM_CONF"}
    return {**env, "PCTK_HOME": str(tmp_path / "state"), **extra}


def _one_line(r: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    for w in words:
        assert w in line, line
    return line


def test_purge_with_no_twin_keeps_a_users_folder_of_the_default_name(tmp_path):
    # the default cluster's folder name under the twin root, made by the user, no twin.json
    root = tmp_path / "fr"
    data = root / "p5_training" / "data"
    data.mkdir(parents=True)
    (data / "important.txt").write_text("keep me\n")
    r = _pctk(_env(tmp_path, PCTK_TWIN_DIR=str(root)), "local", "down", "--purge")
    _one_line(r, 2, "p5_training", "not a twin's folder", "nothing removed")
    assert (data / "important.txt").read_text() == "keep me\n"


def test_purge_by_state_dir_keeps_a_users_folder_and_removes_a_stopped_twins(tmp_path):
    root = tmp_path / "twins"
    (root / "p5_training").mkdir(parents=True)
    (root / "p5_training" / "notes.txt").write_text("mine\n")
    r = _pctk(_env(tmp_path), "local", "down", "--purge", "--state-dir", str(root))
    _one_line(r, 2, "nothing removed")
    assert (root / "p5_training" / "notes.txt").exists()

    # a stopped twin's folder (twin.json written by pctk) is removed, and said so
    twin = root / "mycluster"
    twin.mkdir()
    state.save(twin, state.TwinState(cluster="mycluster", config=str(tmp_path / "x.yaml")))
    (twin / "slurmctld.log").write_text("log\n")
    r = _pctk(_env(tmp_path), "local", "down", "--purge", "--state-dir", str(root),
              "--cluster", "mycluster")
    assert r.returncode == 0, r.stderr
    assert f"removed {twin}" in r.stdout
    assert not twin.exists()
    assert (root / "p5_training" / "notes.txt").exists()


def test_purge_of_a_missing_folder_says_there_was_nothing(tmp_path):
    root = tmp_path / "empty-root"
    r = _pctk(_env(tmp_path, PCTK_TWIN_DIR=str(root)), "local", "down", "--purge", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["removed"] is False


def test_a_twin_json_that_is_a_link_is_no_marker(tmp_path):
    root = tmp_path / "twins"
    folder = root / "p5_training"
    folder.mkdir(parents=True)
    elsewhere = tmp_path / "real.json"
    elsewhere.write_text(json.dumps({"cluster": "p5_training"}))
    (folder / state.STATE_FILE).symlink_to(elsewhere)
    (folder / "keep.txt").write_text("x")
    r = _pctk(_env(tmp_path), "local", "down", "--purge", "--state-dir", str(root),
              "--cluster", "p5_training")
    _one_line(r, 2, "nothing removed")
    assert (folder / "keep.txt").exists()


@pytest.mark.parametrize("how", ["env", "option"])
@pytest.mark.parametrize("folder", ["/", "/etc", "/usr/local", "HOME"])
def test_a_system_or_home_folder_is_refused_as_twin_root(tmp_path, how, folder):
    env = _env(tmp_path)
    if folder == "HOME":
        folder = str(tmp_path / "home")
        Path(folder).mkdir()
        # the refusal compares with the home folder Python finds; HOME is what it reads
    extra = ["--state-dir", folder] if how == "option" else []
    if how == "env":
        env["PCTK_TWIN_DIR"] = folder
    for argv in (["local", "status"], ["local", "down", "--purge"]):
        r = _pctk(env, *argv, *extra)
        _one_line(r, 2, "would put pctk's state")
    assert Path("/etc/passwd").exists()


@pytest.mark.parametrize("var", ["PCTK_HOME", "PCTK_JOBS_DIR", "PCTK_TWIN_DIR"])
def test_every_state_variable_refuses_the_home_folder(tmp_path, var):
    env = _env(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env[var] = str(home)
    argv = ["logs", "1"] if var == "PCTK_JOBS_DIR" else ["local", "status"]
    _one_line(_pctk(env, *argv), 2, var, "your home folder")


def test_configs_that_differ_only_in_dash_and_underscore_do_not_share_a_twin(tmp_path):
    """rt-x.yaml and rt_x.yaml are both Slurm cluster rt_x: the second `up` would restart
    the first one's twin and cancel its jobs. Refused before anything stops."""
    preset = REPO / "cluster-configs" / "p5-training.yaml"
    first, second = tmp_path / "rt-x.yaml", tmp_path / "rt_x.yaml"
    first.write_text(preset.read_text())
    second.write_text(preset.read_text())
    root = tmp_path / "twins"
    held = root / "rt_x"
    held.mkdir(parents=True)
    state.save(held, state.TwinState(cluster="rt_x", config=str(first)))
    before = state.state_file(held).read_text()
    try:
        r = _pctk(_env(tmp_path), "local", "up", "-c", str(second), "--state-dir", str(root))
        after = state.state_file(held).read_text()
    finally:  # had it started the twin, it must not outlive the test
        _pctk(_env(tmp_path), "local", "down", "--state-dir", str(root), "--cluster", "rt_x")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]  # after the notice of which Slurm would run
    for words in ("rt_x.yaml", "rt-x.yaml", "'rt_x'", "rename one config"):
        assert words in last, last
    assert after == before


def test_status_after_a_purge_names_no_twin(tmp_path):
    """After `down --purge`, `local status` showed a twin 'p5_training' that was never
    started (the default preset's folder name); it now says there is none."""
    root = tmp_path / "twins"
    twin = root / "mycluster"
    twin.mkdir(parents=True)
    state.save(twin, state.TwinState(cluster="mycluster", config=str(tmp_path / "x.yaml")))
    env = _env(tmp_path, PCTK_TWIN_DIR=str(root))
    assert _pctk(env, "local", "down", "--purge").returncode == 0
    r = _pctk(env, "local", "status")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert r.stdout.startswith(f"no twin in {root}:"), r.stdout
    assert "p5_training" not in r.stdout


def test_gc_beside_a_users_folder_removes_nothing_of_it(tmp_path):
    """gc removes only what twins that are gone left (daemons recorded by pctk, MariaDB
    homes whose owner file pctk wrote): a user's folders under --under stay whole."""
    under = tmp_path / "work"
    for name in ("p5_training", "twin", "mysql"):
        (under / name / "data").mkdir(parents=True)
        (under / name / "data" / "important.txt").write_text("keep\n")
    r = _pctk(_env(tmp_path), "local", "gc", "--under", str(under), "--json")
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    assert not any(str(under) in str(h) for h in found.get("homes", [])), found
    for name in ("p5_training", "twin", "mysql"):
        assert (under / name / "data" / "important.txt").read_text() == "keep\n"


def test_a_twin_folder_left_without_its_state_file_is_still_purged(tmp_path):
    """A start refused before twin.json was written, or a purge stopped half-way, leaves a
    folder of nothing but a twin's own entries: that is pctk's, and a purge removes it."""
    root = tmp_path / "twins"
    folder = root / "p5_training"
    (folder / "etc").mkdir(parents=True)
    (folder / "etc" / "slurm.conf").write_text("ClusterName=p5_training\n")
    (folder / ".lock").write_text("")
    (folder / ".twin.json.abc.tmp").write_text("{")
    r = _pctk(_env(tmp_path, PCTK_TWIN_DIR=str(root)), "local", "down", "--purge")
    assert r.returncode == 0, r.stderr
    assert f"removed {folder}" in r.stdout and not folder.exists()
