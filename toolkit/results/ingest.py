"""Ingest record files written by node-side jobs (``pctk results add FILE...``).

All files are read and validated before anything is stored, so one bad file stores nothing.
Raw logs named in a record are taken only from the record's own folder (see
:mod:`toolkit.results.rawlogs`); a named log that is missing or refused (absolute, ``..``,
a symbolic link, not a regular file, too large) is reported and skipped while the
measurements still count. A log passed explicitly that is missing or refused is an error.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.record import RecordError, read_record, validate_record
from toolkit.errors import PctkError, visible
from toolkit.results.rawlogs import LogRefused, NamedLog, RawLog, check_raw_log
from toolkit.results.store import ResultStore, printable


@dataclass
class RecordFile:
    path: Path
    record: dict[str, Any]
    logs: list[RawLog] = field(default_factory=list)
    missing_logs: list[str] = field(default_factory=list)
    refused_logs: list[str] = field(default_factory=list)  # "name: why"


@dataclass(frozen=True)
class Ingested:
    path: Path
    id: str
    kind: str
    new: bool
    logs: int
    missing_logs: list[str]
    refused_logs: list[str]


def read_record_file(path: Path) -> dict[str, Any]:
    """A record file checked as the store checks what it takes; one-line PctkError else."""
    if not path.is_file():
        what = "is not a file" if path.exists() else "no such file"
        raise PctkError(f"{path}: {what}", "pass result record JSON files (a shell glob works: "
                        "results/*.json)")
    try:
        return read_record(path)
    except RecordError as exc:
        message = str(exc)
        if not message.startswith(str(path)):
            message = f"{path}: {message}"
        raise PctkError(message, "pass a pctk.result/v1 record written by a pctk benchmark "
                        "or health run") from None
    except OSError as exc:
        raise PctkError(f"{path}: cannot read ({exc.strerror})", "check permissions") from None


def record_from(ref: str, store: ResultStore) -> dict[str, Any]:
    """A record named on the command line: a record file, else a stored result id (or a
    unique prefix of one); either way checked as ``results add`` checks it."""
    path = Path(ref)
    if path.is_file():
        return read_record_file(path)
    if path.exists() or "/" in ref or ref.endswith(".json"):
        what = "is not a regular file" if path.exists() else "does not exist"
        raise PctkError(f"{ref} {what}", "give a record file (record.json of a run folder) "
                        "or a stored result id (`pctk results list`)")
    return store.get(ref)


def load_record_file(path: Path, extra_logs: Sequence[Path] = ()) -> RecordFile:
    record = read_record_file(path)
    loaded = RecordFile(path, record)
    for name in record["raw_logs"]:
        _sort_named_log(loaded, NamedLog(path.parent, name))
    for log in extra_logs:
        try:
            check_raw_log(log)
        except LogRefused as exc:
            raise PctkError(f"raw log {log}: {exc}", "pass regular log files") from None
        except OSError as exc:
            raise PctkError(f"raw log {log}: {exc.strerror}", "check the --log paths") from None
        loaded.logs.append(log)
    return loaded


def _sort_named_log(loaded: RecordFile, log: NamedLog) -> None:
    shown = printable(log.name, 200)
    try:
        check_raw_log(log)
    except LogRefused as exc:
        loaded.refused_logs.append(f"{shown}: {exc}")
    except FileNotFoundError:
        loaded.missing_logs.append(str(log.folder / shown))
    except OSError as exc:
        loaded.refused_logs.append(f"{shown}: {exc.strerror}")
    else:
        loaded.logs.append(log)


def load_record_files(paths: Sequence[Path],
                      extra_logs: Sequence[Path] = ()) -> list[RecordFile]:
    """Read and validate every file; ``extra_logs`` attach to each record."""
    return [load_record_file(p, extra_logs) for p in paths]


def store_record_files(store: ResultStore, loaded: Sequence[RecordFile]) -> list[Ingested]:
    done = []
    for item in loaded:
        new = not store.has(item.record["id"])
        rid = store.add(item.record, raw_logs=item.logs)
        new = new and rid == item.record["id"]  # else: the same raw logs were stored as rid
        done.append(Ingested(item.path, rid, item.record["kind"], new, len(item.logs),
                             item.missing_logs, item.refused_logs))
    return done


def store_finished_run(record: Path | dict[str, Any], db: Path | None = None,
                       logs: Sequence[Path] = ()) -> Ingested | None:
    """Store a record a pctk command just made: a record file (with the raw logs in its
    folder), or a record in memory with the log files it was parsed from (``logs``).

    Called as a benchmark or health run finishes, after its record file was written: a
    failure to store is one warning line on stderr and ``None``, never a lost result.
    """
    paths = [record] if isinstance(record, Path) else []
    try:
        loaded = (load_record_file(record, logs) if isinstance(record, Path)
                  else _loaded_in_memory(record, logs))
    except (PctkError, OSError, LogRefused, RecordError) as exc:
        _not_stored(exc, paths)
        return None
    done = _store_loaded([loaded], db, paths)
    return done[0] if done else None


def store_finished_runs(records: Sequence[Path], db: Path | None = None
                        ) -> list[Ingested] | None:
    """Store record files a command has written (``pctk bench scaling``: each size's and
    the study's) in one opening of the database; ``None`` after the one warning line that
    says why not and the ``pctk results add`` that stores them later."""
    try:
        loaded = load_record_files(records)
    except PctkError as exc:
        _not_stored(exc, records)
        return None
    return _store_loaded(loaded, db, records)


def _store_loaded(loaded: Sequence[RecordFile], db: Path | None,
                  paths: Sequence[Path]) -> list[Ingested] | None:
    try:
        with ResultStore(db) as store:
            done = store_record_files(store, loaded)
            where = store.path
    except (PctkError, OSError, sqlite3.Error, LogRefused, RecordError) as exc:
        _not_stored(exc, paths)
        return None
    for item in done:
        for name in [*item.missing_logs, *item.refused_logs]:
            print(f"pctk: warning: raw log not kept: {name}", file=sys.stderr)
        if item.new:
            print(f"stored {item.kind} result {item.id} in {where} ({item.logs} raw log(s))",
                  file=sys.stderr)
        else:
            print(f"{item.kind} result already stored as {item.id} in {where} (same record or "
                  "same raw logs)", file=sys.stderr)
    return done


def _not_stored(exc: Exception, paths: Sequence[Path]) -> None:
    """One line: why the results database did not take the run, where its record is and
    the command that stores it later (the run's verdict and exit code are unaffected)."""
    reason = exc.one_line() if isinstance(exc, PctkError) else visible(str(exc))
    if not paths:
        later = ("the record is not in a file: write it with -o FILE, then "
                 "`pctk results add FILE`")
    elif len(paths) == 1:
        later = (f"the record is in {visible(str(paths[0]))}: store it later with "
                 f"`pctk results add {visible(shlex.quote(str(paths[0])))}`")
    else:
        later = (f"the {len(paths)} records are in {visible(str(_common_folder(paths)))}: "
                 "store them later with `pctk results add "
                 + " ".join(visible(shlex.quote(str(p))) for p in paths) + "`")
    print(f"pctk: warning: not stored in the results database ({reason}); {later}",
          file=sys.stderr)


def _common_folder(paths: Sequence[Path]) -> Path:
    return Path(os.path.commonpath([str(p.absolute().parent) for p in paths]))


def _loaded_in_memory(record: dict[str, Any], logs: Sequence[Path]) -> RecordFile:
    loaded = RecordFile(Path("-"), validate_record(record))
    for log in logs:
        check_raw_log(log)
        loaded.logs.append(log)
    return loaded
