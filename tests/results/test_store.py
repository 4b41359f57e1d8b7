from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from benchmarks.record import RecordError
from toolkit.errors import PctkError
from toolkit.results import store as store_mod
from toolkit.results.store import ResultStore, migrate

from . import records


def test_round_trip_with_raw_logs(tmp_path: Path) -> None:
    log = tmp_path / "nccl-tests.log"
    log.write_text("# Avg bus bandwidth : 212.3\n")
    rec = records.nccl_record()
    with ResultStore(tmp_path / "results.db") as db:
        rid = db.add(rec, raw_logs=[log])
        assert rid == rec["id"]
        assert db.get(rid) == rec
        assert db.get(rid[:8]) == rec  # unique prefix
        (stored,) = db.logs(rid)
        assert stored.name == "nccl-tests.log"
        assert stored.path.read_text() == log.read_text()
        assert stored.path.parent.parent == tmp_path / "results.logs"
        assert db.add(rec, raw_logs=[log]) == rid  # idempotent
        assert len(db.list()) == 1


def test_identical_logs_are_stored_once(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("same bytes\n")
    b.write_text("same bytes\n")
    with ResultStore(tmp_path / "r.db") as db:
        db.add(records.nccl_record(), raw_logs=[a])
        db.add(records.fsdp_record(), raw_logs=[b])
    assert len([p for p in (tmp_path / "r.logs").rglob("*") if p.is_file()]) == 1


def test_list_filters_and_orders(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.db") as db:
        old = db.add(records.fsdp_record(created="2026-01-01T00:00:00Z"))
        new = db.add(records.fsdp_record(created="2026-02-01T10:00:00+02:00"))
        other = db.add(records.fsdp_record(created="2026-01-15T00:00:00Z", name="train-b"))
        db.add(records.health_record(created="2026-01-20T00:00:00Z"))
        assert [r["id"] for r in db.list(kind="fsdp")] == [new, other, old]
        assert [r["id"] for r in db.list(kind="fsdp", cluster="train-a")] == [new, old]
        assert [r["id"] for r in db.list(kind="fsdp", since="2026-01-10")] == [new, other]
        assert len(db.list(limit=2)) == 2
        assert db.list(instance_type="p4d.24xlarge") == []
        assert [r["id"] for r in db.latest("fsdp")] == [new, other]


def test_baseline_per_cluster_instance_type_and_kind(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.db") as db:
        first = db.add(records.nccl_record())
        second = db.add(records.nccl_record())
        assert db.baseline("train-a", "p5.48xlarge", "nccl-tests") is None
        assert db.set_baseline(first) == ("train-a", "p5.48xlarge", "nccl-tests")
        db.set_baseline(second)
        baseline = db.baseline("train-a", "p5.48xlarge", "nccl-tests")
        assert baseline is not None and baseline["id"] == second
        assert db.baseline("train-a", "p5.48xlarge", "fsdp") is None
        assert db.baseline("train-b", "p5.48xlarge", "nccl-tests") is None


def test_invalid_record_is_refused(tmp_path: Path) -> None:
    rec = records.nccl_record()
    rec["schema"] = "something/v9"
    with ResultStore(tmp_path / "r.db") as db, pytest.raises(RecordError):
        db.add(rec)


def test_unknown_id_is_a_user_error(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.db") as db, pytest.raises(PctkError, match="no result"):
        db.get("feedfacecafe")


def test_migrates_an_old_database_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=1) == 1
    rec = records.health_record()
    conn.execute(
        "INSERT INTO results (id, kind, created, cluster, instance_type, nodes, status, record,"
        " ingested) VALUES (?, 'health', ?, 'train-a', 'p5.48xlarge', 2, 'PASS', ?, ?)",
        (rec["id"], rec["created"], json.dumps(rec), rec["created"]),
    )
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'baselines'").fetchone() \
        is None
    conn.close()
    with ResultStore(path) as db:
        assert db.schema_version() == store_mod.SCHEMA_VERSION == 2
        assert db.get(rec["id"])["id"] == rec["id"]
        db.set_baseline(rec["id"])
        assert db.baseline("train-a", "p5.48xlarge", "health") is not None
    versions = sqlite3.connect(path).execute(
        "SELECT version FROM schema_migrations ORDER BY version").fetchall()
    assert versions == [(1,), (2,)]


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    ResultStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (99, '2030-01-01T00:00:00Z')")
    conn.commit()
    conn.close()
    with pytest.raises(PctkError, match="newer than this pctk"):
        ResultStore(path)


def test_not_a_database_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(PctkError, match="cannot open"):
        ResultStore(path)


def test_journal_mode_wal_locally_delete_on_network_filesystems(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ResultStore(tmp_path / "local.db") as db:
        mode = db._conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode.upper() == db.journal_mode
    for fstype, expected in (("lustre", "DELETE"), ("nfs4", "DELETE"), ("ext4", "WAL")):
        monkeypatch.setattr(store_mod, "filesystem_type", lambda _p, f=fstype: f)
        assert store_mod.journal_mode_for(Path("/fsx/pctk/results.db")) == expected


def test_default_path_honours_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(store_mod.ENV_DB, raising=False)
    monkeypatch.setenv("PCTK_HOME", str(tmp_path / "home"))
    assert store_mod.default_db_path() == tmp_path / "home" / "results.db"
    monkeypatch.setenv(store_mod.ENV_DB, str(tmp_path / "team.db"))
    assert store_mod.default_db_path() == tmp_path / "team.db"


def test_parse_since() -> None:
    import datetime as dt

    now = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)
    assert store_mod.parse_since("7d", now) == "2026-03-03T12:00:00Z"
    assert store_mod.parse_since("2026-03-01") == "2026-03-01T00:00:00Z"
    with pytest.raises(PctkError):
        store_mod.parse_since("last tuesday")
