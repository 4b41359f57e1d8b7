"""Ingest record files written by node-side jobs (``pctk results add FILE...``).

All files are read and validated before anything is stored, so one bad file stores nothing.
Raw logs named in a record are resolved relative to the record file; a named log that is
missing is reported and skipped (the measurements still count), while a log passed
explicitly that is missing is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.record import RecordError, read_record
from toolkit.errors import PctkError
from toolkit.results.store import ResultStore, utc_iso


@dataclass
class RecordFile:
    path: Path
    record: dict[str, Any]
    logs: list[Path] = field(default_factory=list)
    missing_logs: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class Ingested:
    path: Path
    id: str
    kind: str
    new: bool
    logs: int
    missing_logs: list[str]


def load_record_file(path: Path, extra_logs: Sequence[Path] = ()) -> RecordFile:
    if not path.is_file():
        what = "is not a file" if path.exists() else "no such file"
        raise PctkError(f"{path}: {what}", "pass result record JSON files (a shell glob works: "
                        "results/*.json)")
    try:
        record = read_record(path)
        utc_iso(record["created"])
    except RecordError as exc:
        message = str(exc)
        if not message.startswith(str(path)):
            message = f"{path}: {message}"
        raise PctkError(message, "pass a pctk.result/v1 record written by a pctk benchmark "
                        "or health run") from None
    except UnicodeDecodeError:
        raise PctkError(f"{path}: not a text file", "pass a result record JSON file") from None
    except OSError as exc:
        raise PctkError(f"{path}: cannot read ({exc.strerror})", "check permissions") from None
    loaded = RecordFile(path, record)
    for name in record["raw_logs"]:
        log = Path(name) if Path(name).is_absolute() else path.parent / name
        (loaded.logs if log.is_file() else loaded.missing_logs).append(log)
    for log in extra_logs:
        if not log.is_file():
            raise PctkError(f"raw log {log}: no such file", "check the --log paths")
        loaded.logs.append(log)
    return loaded


def load_record_files(paths: Sequence[Path],
                      extra_logs: Sequence[Path] = ()) -> list[RecordFile]:
    """Read and validate every file; ``extra_logs`` attach to each record."""
    return [load_record_file(p, extra_logs) for p in paths]


def store_record_files(store: ResultStore, loaded: Sequence[RecordFile]) -> list[Ingested]:
    done = []
    for item in loaded:
        new = not store.has(item.record["id"])
        rid = store.add(item.record, raw_logs=item.logs)
        done.append(Ingested(item.path, rid, item.record["kind"], new, len(item.logs),
                             [str(p) for p in item.missing_logs]))
    return done
