"""A results database that cannot be written is still read (``results list``, ``report``).

The tests run as root, and root writes through chmod 0400/0500, so a mode proves nothing.
Two things do stop root, and each is what a user meets:

* a read-only mount (tests/results/readonly.py): every write there is EROFS, to the
  database file and its folder alike (SQLite cannot make its -journal, -wal or -shm files);
* an immutable file (``chattr +i``): the kernel refuses writes to it with EPERM, root's
  included, while its folder stays writable.

Each skips where the kernel does not let this test make it (no CAP_SYS_ADMIN, a filesystem
without the immutable flag).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.record import write_record
from toolkit.results.store import ResultStore, migrate

from . import records
from .readonly import read_only_argv

REPO = Path(__file__).resolve().parents[2]
CODE = "import sys; from toolkit.cli import main; sys.exit(main(sys.argv[1:]))"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PCTK_RESULTS_DB"}
    env.update(PCTK_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    return env


def _filled(folder: Path) -> tuple[Path, list[str]]:
    folder.mkdir()
    db = folder / "results.db"
    with ResultStore(db) as store:
        records.fill_store(store)
        ids = [r["id"] for r in store.list()]
    return db, ids


def _on_read_only_mount(folder: Path, env: dict[str, str], *argv: str
                        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(read_only_argv(folder, sys.executable, "-c", CODE, *argv),
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[list[Path]]:
    """Files made immutable by the test; made mutable again afterwards, pass or fail."""
    if shutil.which("chattr") is None:
        pytest.skip("no chattr(1)")
    made: list[Path] = []
    yield made
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def _make_immutable(path: Path, made: list[Path]) -> None:
    r = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"chattr +i not possible here: {r.stderr.strip()}")
    made.append(path)
    with pytest.raises(PermissionError):  # what makes this a test as root
        path.open("ab")


def test_list_and_report_read_a_store_on_a_read_only_mount(tmp_path: Path) -> None:
    db, ids = _filled(tmp_path / "store")
    before = sorted(p.name for p in db.parent.iterdir())
    out = tmp_path / "report.html"
    env = _env(tmp_path)
    res = _on_read_only_mount(db.parent, env, "results", "list", "--db", str(db),
                              "--limit", "100", "--json")
    assert res.returncode == 0, res.stderr
    assert sorted(r["id"] for r in json.loads(res.stdout)) == sorted(ids)
    # the check is real: in that namespace the database refuses even root
    new = write_record(tmp_path / "new.json", records.health_record())
    res = _on_read_only_mount(db.parent, env, "results", "add", "--db", str(db), str(new))
    assert res.returncode == 2
    assert res.stderr.startswith(f"pctk: error: {db}: cannot write the results database "
                                 "(the file: Read-only file system)"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1

    res = _on_read_only_mount(db.parent, env, "report", "--db", str(db), "-o", str(out),
                              "--json")
    # the report's own verdict: the newest health run failed on gpu-st-p5-2 (exit 1)
    assert res.returncode == 1, res.stderr
    report = json.loads(res.stdout)
    assert report["results"] == len(ids) and report["overall"] == "FAIL"
    assert "gpu-st-p5-2" in out.read_text()
    # nothing was written beside the database: no -shm, -wal or -journal left behind
    assert sorted(p.name for p in db.parent.iterdir()) == before


def test_an_immutable_database_is_read_in_a_writable_folder(tmp_path: Path,
                                                            immutable: list[Path]) -> None:
    db, ids = _filled(tmp_path / "store")
    _make_immutable(db, immutable)
    res = subprocess.run([sys.executable, "-c", CODE, "results", "list", "--db", str(db),
                          "--limit", "100", "--json"], capture_output=True, text=True,
                         cwd=REPO, env=_env(tmp_path), timeout=120)
    assert res.returncode == 0, res.stderr
    assert sorted(r["id"] for r in json.loads(res.stdout)) == sorted(ids)
    with ResultStore(db, writer=False) as store:
        assert store.read_only and store.baseline("train-a", "p5.48xlarge", "fsdp")
    res = subprocess.run([sys.executable, "-c", CODE, "results", "baseline", ids[0], "--db",
                          str(db)], capture_output=True, text=True, cwd=REPO,
                         env=_env(tmp_path), timeout=120)
    assert res.returncode == 2
    assert "cannot write the results database (the file: Operation not permitted)" \
        in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_an_old_schema_on_a_read_only_mount_is_one_clear_line(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "results.db"
    conn = sqlite3.connect(db, isolation_level=None)
    migrate(conn, target=1)  # what a pctk of schema version 1 left
    conn.close()
    res = _on_read_only_mount(folder, _env(tmp_path), "results", "list", "--db", str(db))
    assert res.returncode == 2
    assert res.stderr.startswith(f"pctk: error: {db}: the results database schema version 1 "
                                 "is older than this pctk reads (2), and it is read-only here, "
                                 "so it cannot be migrated; fix: "), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    # where it can be written, the same database is migrated and read as before
    res = subprocess.run([sys.executable, "-c", CODE, "results", "list", "--db", str(db),
                          "--json"], capture_output=True, text=True, cwd=REPO,
                         env=_env(tmp_path), timeout=120)
    assert res.returncode == 0 and json.loads(res.stdout) == [], res.stderr
