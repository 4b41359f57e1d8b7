"""Ingest record files written by node-side jobs (``pctk results add FILE...``).

All files are read and validated before anything is stored, so one bad file stores nothing.
Raw logs named in a record are taken only from the record's own folder (see
:mod:`toolkit.results.rawlogs`); a named log that is missing or refused (absolute, ``..``,
a symbolic link, not a regular file, too large) is reported and skipped while the
measurements still count. A log passed explicitly that is missing or refused is an error.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.record import RecordError, read_record, validate_record
from toolkit.errors import PctkError
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

    Called as a benchmark or health run finishes: a failure to store is one warning line on
    stderr and ``None``, never a lost result (the record file stays where it was written).
    """
    shown = record if isinstance(record, Path) else "the record (write it with -o)"
    try:
        loaded = (load_record_file(record, logs) if isinstance(record, Path)
                  else _loaded_in_memory(record, logs))
        with ResultStore(db) as store:
            done = store_record_files(store, [loaded])[0]
            where = store.path
    except (PctkError, OSError, sqlite3.Error, LogRefused, RecordError) as exc:
        reason = exc.one_line() if isinstance(exc, PctkError) else str(exc)
        print(f"pctk: warning: result not stored in the results database: {reason}; "
              f"the run's result is unaffected (`pctk results add` can store {shown} later)",
              file=sys.stderr)
        return None
    for name in [*done.missing_logs, *done.refused_logs]:
        print(f"pctk: warning: raw log not kept: {name}", file=sys.stderr)
    if done.new:
        print(f"stored {done.kind} result {done.id} in {where} ({done.logs} raw log(s))",
              file=sys.stderr)
    else:
        print(f"{done.kind} result already stored as {done.id} in {where} (same record or "
              "same raw logs)", file=sys.stderr)
    return done


def _loaded_in_memory(record: dict[str, Any], logs: Sequence[Path]) -> RecordFile:
    loaded = RecordFile(Path("-"), validate_record(record))
    for log in logs:
        check_raw_log(log)
        loaded.logs.append(log)
    return loaded
