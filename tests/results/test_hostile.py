"""Hostile records: refused on the way in, and skipped (and named) by every reader when a
row got into the database some other way (an old pctk, another writer)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.record import (
    MAX_FILE_BYTES,
    MAX_RECORD_BYTES,
    RecordError,
    loads_record,
    validate_record,
    write_record,
)
from toolkit.results.store import ResultStore

from . import records
from .conftest import Run

PLACEHOLDER = '"@@"'


def metric_text(raw_value: str) -> str:
    """An otherwise valid fsdp record whose metric ``x`` is ``raw_value`` verbatim."""
    rec = records.fsdp_record()
    rec["metrics"]["x"] = "@@"
    return json.dumps(rec).replace(PLACEHOLDER, raw_value)


def edited(edit: Callable[[dict[str, Any]], None]) -> str:
    rec = records.fsdp_record()
    edit(rec)
    return json.dumps(rec)  # ensure_ascii: a lone surrogate is written as \ud800


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE: list[tuple[str, str, str]] = [
    ("400-digit integer", metric_text("9" * 400), "64-bit"),
    ("5000-digit integer", metric_text("9" * 5000), "number too long"),
    ("int64 max + 1", metric_text(str(1 << 63)), "64-bit"),
    ("float overflow", metric_text("1e400"), "not a finite number"),
    ("nesting 100 deep", metric_text(nested(100)), "nested more than"),
    ("nesting 100,000 deep", metric_text(nested(100_000)), "nested more than"),
    ("lone surrogate in a value",
     edited(lambda r: r["cluster"].update(name="train-\ud800")), "lone surrogate"),
    ("lone surrogate in a key",
     edited(lambda r: r["metrics"].update({"\udfff": 1})), "lone surrogate"),
    ("year 1 with an offset",
     edited(lambda r: r.update(created="0001-01-01T00:00:00+05:00")), "created"),
    ("year 9999 with an offset",
     edited(lambda r: r.update(created="9999-12-31T23:59:59-05:00")), "created"),
    ("year 3000", edited(lambda r: r.update(created="3000-01-01T00:00:00Z")), "outside"),
    ("not a date", edited(lambda r: r.update(created="yesterday")), "ISO 8601"),
    ("400-digit node count",
     edited(lambda r: r["cluster"].update(nodes=10**400)), "64-bit"),
    ("node count as text", edited(lambda r: r["cluster"].update(nodes="2")), "cluster.nodes"),
    ("hosts of mixed types",
     edited(lambda r: r["cluster"].update(hosts=[1, "a"])), "cluster.hosts"),
    ("reasons not text",
     edited(lambda r: r["verdict"].update(reasons=[{"a": 1}])), "verdict.reasons"),
    ("id with a newline", edited(lambda r: r.update(id="abc\ndef")), "id "),
    ("raw log name with NUL", edited(lambda r: r.update(raw_logs=["a\0b"])), "raw_logs"),
    ("17 MiB record", edited(lambda r: r["params"].update(pad="x" * (17 << 20))), "bytes"),
]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(("text", "fragment"), [(t, f) for _, t, f in HOSTILE],
                         ids=[name for name, _, _ in HOSTILE])
def test_hostile_record_is_refused_with_one_line(tmp_path: Path, db: Path, pctk: Run,
                                                 text: str, fragment: str) -> None:
    good = write_record(tmp_path / "good.json", records.nccl_record())
    assert pctk("results", "add", good, "--db", db)[0] == 0
    before, listed = _digest(db), pctk("results", "list", "--db", db, "--json")[1]
    bad = tmp_path / "bad.json"
    bad.write_text(text, encoding="utf-8")

    code, out, err = pctk("results", "add", bad, "--db", db)

    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"pctk: error: {bad}: ") and fragment in err, err
    assert "Traceback" not in err and len(err) < 400
    assert _digest(db) == before
    assert pctk("results", "list", "--db", db, "--json")[1] == listed


def test_record_file_that_is_huge_or_a_fifo_is_refused(tmp_path: Path, db: Path,
                                                       pctk: Run) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as fh:  # sparse
        fh.truncate(MAX_FILE_BYTES + 1)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path, fragment in ((huge, "larger than"), (fifo, "not a file")):
        code, _, err = pctk("results", "add", path, "--db", db)
        assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err, err
    assert not db.exists()


def test_api_refuses_what_the_cli_refuses(tmp_path: Path) -> None:
    rec = records.fsdp_record()
    rec["metrics"]["nan"] = float("nan")
    with ResultStore(tmp_path / "r.db") as db, pytest.raises(RecordError, match="finite"):
        db.add(rec)
    with pytest.raises(RecordError, match="64-bit"):
        validate_record({**records.fsdp_record(), "metrics": {"x": -(1 << 63) - 1}})


def raw_text(edit: Callable[[dict[str, Any]], None]) -> str:
    """Like :func:`edited`, with non-ASCII characters (lone surrogates too) left raw."""
    rec = records.fsdp_record()
    edit(rec)
    return json.dumps(rec, ensure_ascii=False)


EDGE_CASES: list[tuple[str, str, bool]] = [  # name, text, valid
    ("raw non-ASCII", raw_text(lambda r: r["cluster"].update(name="tr\u00e2in-\U0001F600")),
     True),
    ("raw lone surrogate", raw_text(lambda r: r["cluster"].update(name="a\udc80")), False),
    ("raw lone surrogate in a key", raw_text(lambda r: r["metrics"].update({"\ud800": 1})),
     False),
    ("escaped non-ASCII", edited(lambda r: r["params"].update(note="\u00e9\u4e2d")), True),
    ("int64 max", metric_text(str((1 << 63) - 1)), True),
    ("int64 min", metric_text(str(-(1 << 63))), True),
    ("int64 min - 1", metric_text(str(-(1 << 63) - 1)), False),
    ("largest float", metric_text("1.7976931348623157e308"), True),
    ("nesting 32 deep", metric_text(nested(31)), True),
    ("nesting 33 deep", metric_text(nested(32)), False),
    ("bare NaN", metric_text("NaN"), True),
    ("raw DEL", metric_text('"\x7f"'), True),
]


@pytest.mark.parametrize(("text", "valid"),
                         [(t, False) for _, t, _ in HOSTILE] + [(t, v) for _, t, v in EDGE_CASES],
                         ids=[n for n, _, _ in HOSTILE] + [n for n, _, _ in EDGE_CASES])
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_reading_a_record_judges_as_the_full_check_does(text: str, valid: bool,
                                                        as_bytes: bool) -> None:
    """loads_record skips the per-value walk for plain JSON; it must accept and refuse
    exactly what validate_record does (the store reads bytes, files are read as bytes)."""
    raw = text.encode("utf-8", "surrogatepass") if as_bytes else text
    try:
        validate_record(json.loads(raw, parse_constant=lambda _name: None))
        full_verdict = True
    except (RecordError, ValueError, RecursionError):
        full_verdict = False
    try:
        loads_record(raw)
        fast_verdict = True
    except RecordError:
        fast_verdict = False
    assert (fast_verdict, full_verdict) == (valid, valid)


def test_text_under_the_limit_that_dumps_past_it_is_refused(tmp_path: Path) -> None:
    """3 MiB of raw DEL characters dump to 18 MiB of \\u007f escapes."""
    text = metric_text('"' + "\x7f" * (3 << 20) + '"')
    assert len(text) < MAX_RECORD_BYTES
    with pytest.raises(RecordError, match="bytes"):
        loads_record(text.encode())


def test_unmeasured_figures_are_written_and_read_as_null(tmp_path: Path, db: Path,
                                                         pctk: Run) -> None:
    """benchmarks.fsdp reports a NaN step-time percentile when no step was measured."""
    rec = records.fsdp_record()
    rec["metrics"]["step_time_p50_s"] = float("nan")
    path = write_record(tmp_path / "fsdp.json", rec)
    assert '"step_time_p50_s": null' in path.read_text()
    old = tmp_path / "old.json"  # what an older writer left: a bare NaN token
    old.write_text(path.read_text().replace('"step_time_p50_s": null', '"step_time_p50_s": NaN')
                   .replace(rec["id"], "0" * 32))
    code, _, err = pctk("results", "add", path, old, "--db", db)
    assert code == 0, err
    code, out, _ = pctk("results", "show", "0" * 32, "--db", db, "--json")
    assert code == 0 and json.loads(out)["record"]["metrics"]["step_time_p50_s"] is None


# --- readers ------------------------------------------------------------------------------

BAD_NCCL = "bad0" + "1" * 28  # newest nccl-tests record of the group, with a 400-digit busbw
BAD_FSDP = "bad0" + "2" * 28  # newest fsdp record, nested 5,000 deep
BAD_HEALTH = "bad0" + "3" * 28  # the health baseline, with a lone surrogate
BAD_UTF8 = "bad0" + "4" * 28  # not UTF-8 at all
BAD_DATE = "bad0" + "5" * 28  # a date no clock reaches
BAD_IDS = (BAD_NCCL, BAD_FSDP, BAD_HEALTH, BAD_UTF8, BAD_DATE)


def _insert(conn: sqlite3.Connection, rid: str, kind: str, record: str | bytes) -> None:
    conn.execute(
        "INSERT INTO results (id, kind, created, cluster, instance_type, nodes, status,"
        " record, ingested) VALUES (?, ?, '2026-02-01T00:00:00Z', 'train-a', 'p5.48xlarge',"
        " 2, 'PASS', ?, '2026-02-01T00:00:00Z')", (rid, kind, record))


@pytest.fixture
def poisoned(tmp_path: Path, db: Path, pctk: Run) -> dict[str, str]:
    """A store with good records of each kind and baselines, then hostile rows written
    directly with sqlite3, bypassing validation."""
    good = {
        "nccl": records.nccl_record(created="2026-01-01T00:00:00Z"),
        "nccl_new": records.nccl_record(created="2026-01-02T00:00:00Z"),
        "fsdp": records.fsdp_record(created="2026-01-01T00:00:00Z"),
        "health": records.health_record(created="2026-01-01T00:00:00Z"),
    }
    files = [write_record(tmp_path / f"{name}.json", rec) for name, rec in good.items()]
    assert pctk("results", "add", *files, "--db", db)[0] == 0
    for name in ("nccl", "fsdp"):
        assert pctk("results", "baseline", good[name]["id"], "--db", db)[0] == 0

    huge = json.loads(json.dumps(good["nccl_new"]))
    huge["id"] = BAD_NCCL
    huge["metrics"]["collectives"][0]["rows"][-1]["out_of_place"]["busbw"] = "@@"
    surrogate = {**good["health"], "id": BAD_HEALTH}
    surrogate["cluster"] = {**surrogate["cluster"], "hosts": ["gpu-\ud800"]}
    dated = {**good["fsdp"], "id": BAD_DATE, "created": "0001-01-01T00:00:00+05:00"}
    conn = sqlite3.connect(db)
    with conn:
        _insert(conn, BAD_NCCL, "nccl-tests", json.dumps(huge).replace(PLACEHOLDER, "9" * 400))
        _insert(conn, BAD_FSDP, "fsdp", nested(5000))
        _insert(conn, BAD_HEALTH, "health", json.dumps(surrogate))
        _insert(conn, BAD_UTF8, "fsdp", b'{"id": "\xff\xfe"}')
        _insert(conn, BAD_DATE, "fsdp", json.dumps(dated))
        conn.execute("INSERT OR REPLACE INTO baselines VALUES ('train-a', 'p5.48xlarge',"
                     " 'health', ?, '2026-02-01T00:00:00Z')", (BAD_HEALTH,))
    conn.close()
    return {name: rec["id"] for name, rec in good.items()}


def _skipped(err: str) -> list[str]:
    return [line.split()[4].rstrip(":") for line in err.splitlines()
            if line.startswith("warning: skipped stored result ")]


@pytest.mark.parametrize("argv", [
    ("results", "list", "--limit", "50"),
    ("results", "list", "--json", "--limit", "50"),
    ("results", "compare"),
    ("results", "compare", "--json"),
    ("results", "prometheus"),
    ("report", "--out", "REPORT"),
    ("results", "baseline"),
    ("results", "show", "GOOD"),
], ids=lambda argv: " ".join(argv))
def test_every_reader_skips_and_names_a_poisoned_row(tmp_path: Path, db: Path, pctk: Run,
                                                     poisoned: dict[str, str],
                                                     argv: tuple[str, ...]) -> None:
    args = [str(tmp_path / "report.html") if a == "REPORT" else
            poisoned["nccl_new"] if a == "GOOD" else a for a in argv]
    code, out, err = pctk(*args, "--db", db)

    assert code in (0, 1), err  # compare may find a regression; it must not fail
    assert "Traceback" not in err and "pctk: error" not in err, err
    named = _skipped(err)
    assert len(named) == len(set(named)), err  # each named once
    assert set(named) <= set(BAD_IDS)
    assert len(err.strip().splitlines()) == len(named), err  # nothing else on stderr
    for bad in BAD_IDS:
        assert bad not in out
    if argv[1] in ("list", "compare", "prometheus") or argv[0] == "report":
        assert sorted(named) == sorted(BAD_IDS)
    if "--json" in argv and argv[1] == "list":
        assert {r["id"] for r in json.loads(out)} == set(poisoned.values())
    if argv[1] == "prometheus":  # the good nccl result stands in for the skipped newer one
        assert 'pctk_baseline_regressions{cluster="train-a"' in out
    if argv[0] == "report":
        html = (tmp_path / "report.html").read_text()
        assert "5 result(s)" not in html and "4 result(s)" in html
    if argv[1] == "baseline":
        assert named == [BAD_HEALTH]
    if argv[1] == "show":
        assert named == [] and poisoned["nccl_new"] in out


def test_console_script_in_a_c_locale(tmp_path: Path, db: Path,
                                      poisoned: dict[str, str]) -> None:
    """The real process: stderr in ASCII, nothing but the one line / the warnings."""
    bad = tmp_path / "surrogate.json"
    bad.write_text(HOSTILE[6][1])
    env = {**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": ""}

    def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "toolkit.cli", *map(str, argv), "--db",
                               str(db)], capture_output=True, text=True, env=env, timeout=120)

    added = run("results", "add", bad)
    assert added.returncode == 2 and added.stderr.count("\n") == 1, added.stderr
    assert "lone surrogate" in added.stderr
    listed = run("results", "list", "--limit", "50")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert sorted(_skipped(listed.stderr)) == sorted(BAD_IDS)


def test_show_and_baseline_of_a_poisoned_row_are_one_line_errors(db: Path, pctk: Run,
                                                                 poisoned: dict[str, str]
                                                                 ) -> None:
    for argv in (("results", "show", BAD_NCCL), ("results", "show", BAD_UTF8[:8]),
                 ("results", "baseline", BAD_FSDP),
                 ("results", "compare", poisoned["nccl_new"], "--against", BAD_DATE)):
        code, _, err = pctk(*argv, "--db", db)
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1 and err.startswith("pctk: error: stored "
                                                                     "result bad0"), err


def test_valid_but_odd_records_do_not_break_readers(tmp_path: Path, db: Path,
                                                    pctk: Run) -> None:
    """Values the schema allows but no writer produces: readers ignore what they cannot
    use (found by mutating real records at random). The values of this kind found in the
    fields readers compute with (checkpoint_saves 3.5, MFU 1.7e308, rows 2.5) are refused at
    the store's door now: test_hostile_records.py."""
    fsdp = records.fsdp_record()
    fsdp["metrics"].update(checkpoint=3.5, loss="low", steps=[1, "x"], odd=1.7e308)
    nccl = records.nccl_record()
    nccl["metrics"]["collectives"][0]["rows"][-1]["out_of_place"]["busbw"] = 1.7e308
    nccl["metrics"]["collectives"].append({"collective": "all_gather", "dtype": [1],
                                           "rows": [{"size_bytes": None}]})
    files = [write_record(tmp_path / f"{r['kind']}.json", r) for r in (fsdp, nccl)]
    assert pctk("results", "add", *files, "--baseline", "--db", db)[0] == 0
    for argv in (("results", "list"), ("results", "show", fsdp["id"]),
                 ("results", "show", nccl["id"]), ("results", "prometheus"),
                 ("results", "compare"), ("report", "--out", tmp_path / "r.html")):
        code, _, err = pctk(*argv, "--db", db)
        assert code == 0 and err == "", (argv, err)
