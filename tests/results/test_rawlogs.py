"""Raw logs a record names are kept only from inside the record's folder, and the store's
files are private unless PCTK_RESULTS_SHARED=1 (real files, links and FIFOs)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from benchmarks.record import write_record
from toolkit.results.rawlogs import MAX_RAW_LOG_BYTES

from . import records
from .conftest import Run

SECRET = "munge-key-material-0123456789"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A private file outside the jobs folder, standing in for munge.key."""
    folder = tmp_path / "etc"
    folder.mkdir()
    key = folder / "munge.key"
    key.write_text(SECRET)
    key.chmod(0o600)
    return key


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    saved = os.umask(0o022)
    os.umask(saved)

    def set_umask(value: int) -> None:
        os.umask(value)

    yield set_umask
    os.umask(saved)


def record_naming(folder: Path, name: str) -> Path:
    rec = records.nccl_record()
    rec["raw_logs"] = [name]
    return write_record(folder / "record.json", rec)


def _symlink_to_secret(jobs: Path, secret: Path) -> str:
    (jobs / "nccl.log").symlink_to(secret)
    return "nccl.log"


def _symlinked_folder(jobs: Path, secret: Path) -> str:
    (jobs / "logs").symlink_to(secret.parent, target_is_directory=True)
    return "logs/munge.key"


def _fifo(jobs: Path, secret: Path) -> str:
    os.mkfifo(jobs / "nccl.log")
    return "nccl.log"


def _oversize(jobs: Path, secret: Path) -> str:
    with (jobs / "nccl.log").open("wb") as fh:  # sparse: no disk space used
        fh.truncate(MAX_RAW_LOG_BYTES + 1)
    return "nccl.log"


HOSTILE_LOGS: list[tuple[str, Callable[[Path, Path], str], str]] = [
    ("absolute path", lambda jobs, secret: str(secret), "absolute path"),
    ("dot-dot", lambda jobs, secret: "../etc/munge.key", "'..'"),
    ("dot-dot inside", lambda jobs, secret: "sub/../../etc/munge.key", "'..'"),
    ("symlink to a secret", _symlink_to_secret, "symbolic link"),
    ("symlinked folder", _symlinked_folder, "symbolic link"),
    ("FIFO", _fifo, "not a regular file"),
    ("over the size limit", _oversize, "more than the limit"),
]


@pytest.mark.parametrize(("make", "reason"), [(m, r) for _, m, r in HOSTILE_LOGS],
                         ids=[name for name, _, _ in HOSTILE_LOGS])
def test_a_log_outside_the_record_folder_is_refused(tmp_path: Path, db: Path, pctk: Run,
                                                    secret: Path,
                                                    make: Callable[[Path, Path], str],
                                                    reason: str) -> None:
    jobs = tmp_path / "jobs"
    (jobs / "sub").mkdir(parents=True)
    name = make(jobs, secret)
    path = record_naming(jobs, name)

    code, out, err = pctk("results", "add", path, "--db", db, "--json")

    assert code == 0, err  # the measurements still count
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"warning: {path}: raw log not kept, ") and reason in err, err
    assert json.loads(out)["added"][0]["logs"] == 0
    stored = [p for p in db.with_suffix(".logs").rglob("*") if p.is_file()]
    assert stored == []
    assert SECRET.encode() not in db.read_bytes()


def test_explicit_log_that_is_a_fifo_is_an_error(tmp_path: Path, db: Path, pctk: Run) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    path = write_record(tmp_path / "rec.json", records.fsdp_record())
    code, _, err = pctk("results", "add", path, "--log", fifo, "--db", db)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not a regular file" in err
    assert not db.exists()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _add_with_log(tmp_path: Path, db: Path, pctk: Run) -> Path:
    jobs = tmp_path / "jobs"
    (jobs / "logs").mkdir(parents=True)
    (jobs / "logs" / "nccl.log").write_text("#  size  count ...\n")
    code, out, err = pctk("results", "add", record_naming(jobs, "logs/nccl.log"),
                          "--db", db, "--json")
    assert code == 0 and err == "", err
    assert json.loads(out)["added"][0]["logs"] == 1
    (log,) = [p for p in db.with_suffix(".logs").rglob("*") if p.is_file()]
    assert log.read_text() == "#  size  count ...\n"
    return log


def test_store_is_private_by_default(tmp_path: Path, pctk: Run, umask: Callable[[int], None],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PCTK_RESULTS_SHARED", raising=False)
    umask(0o022)
    db = tmp_path / "store" / "results.db"
    log = _add_with_log(tmp_path, db, pctk)
    assert _mode(db.parent) == 0o700
    assert _mode(db) == 0o600
    assert _mode(db.with_suffix(".logs")) == 0o700 and _mode(log.parent) == 0o700
    assert _mode(log) == 0o600
    for extra in db.parent.glob("results.db-*"):  # -wal / -shm while they exist
        assert _mode(extra) == 0o600, extra


def test_shared_store_follows_the_umask(tmp_path: Path, pctk: Run,
                                        umask: Callable[[int], None],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PCTK_RESULTS_SHARED", "1")
    umask(0o002)
    db = tmp_path / "team" / "results.db"
    log = _add_with_log(tmp_path, db, pctk)
    assert _mode(db.parent) == 0o775 and _mode(db) == 0o664
    assert _mode(log.parent) == 0o775 and _mode(log) == 0o664


def test_shared_store_with_a_strict_umask_stays_private(tmp_path: Path, pctk: Run,
                                                       umask: Callable[[int], None],
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setenv("PCTK_RESULTS_SHARED", "1")
    umask(0o077)
    db = tmp_path / "team" / "results.db"
    log = _add_with_log(tmp_path, db, pctk)
    assert _mode(db) == 0o600 and _mode(log) == 0o600 and _mode(db.parent) == 0o700
