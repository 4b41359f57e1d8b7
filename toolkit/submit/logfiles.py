"""Find a job's log files, for ``pctk logs``: plain jobs, arrays, and submitit jobs.

Two naming schemes are understood:

* ``pctk submit``: ``<job>.batch.out`` and ``<job>.<rank>.out|err``; array elements
  ``<array>_<index>.batch.out`` and ``<array>_<index>.<rank>.out|err``;
* submitit (``ClusterExecutor``, ``pctk submit --fn``): ``<job>_<rank>_log.out|err``; array
  elements ``<array>_<index>_<rank>_log.out|err``.

Files are ordered as a reader expects: by array index, then the batch log, then ranks in
numeric order (1.2 before 1.10), ``.out`` before ``.err``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from submitit.core.utils import JobPaths

_COMMAND = re.compile(r"^(\d+)(?:_(\d+))?\.(batch|\d+)\.(out|err)$")
_SUBMITIT = re.compile(r"^(\d+)(?:_(\d+))?_(\d+)_log\.(out|err)$")


@dataclass(frozen=True)
class LogFile:
    path: Path
    job: str
    index: int | None  # array index; None for a plain job
    rank: int | None  # None for the batch script's own log
    stream: str  # "out" or "err"

    def sort_key(self) -> tuple[int, int, int]:
        return (-1 if self.index is None else self.index,
                -1 if self.rank is None else self.rank,
                0 if self.stream == "out" else 1)


def parse_name(path: Path) -> LogFile | None:
    m = _COMMAND.match(path.name)
    if m:
        rank = None if m.group(3) == "batch" else int(m.group(3))
        return LogFile(path, m.group(1), _int(m.group(2)), rank, m.group(4))
    m = _SUBMITIT.match(path.name)
    if m:
        return LogFile(path, m.group(1), _int(m.group(2)), int(m.group(3)), m.group(4))
    return None


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)


def find_logs(folder: Path, job_id: str, rank: int | None = None) -> list[Path]:
    """Log files of ``job_id`` (``123`` or an array element ``123_4``) in ``folder``.

    A plain array id (``123``) selects every element; ``rank`` keeps that rank's files only.
    """
    main, _, element = job_id.partition("_")
    want_index = int(element) if element else None
    found: list[LogFile] = []
    try:
        candidates = list(folder.glob(f"{main}[._]*"))
    except OSError:
        return []
    for path in candidates:
        log = parse_name(path)
        if log is None or log.job != main:
            continue
        if want_index is not None and log.index != want_index:
            continue
        if rank is not None and log.rank != rank:
            continue
        found.append(log)
    return [log.path for log in sorted(found, key=LogFile.sort_key)]


def submitit_folder(template: str, job_id: str) -> Path:
    """The folder a submitit executor writes ``job_id``'s logs to (``%j``/``%A``/``%a`` filled)."""
    try:
        return JobPaths(template, job_id=job_id).folder
    except ValueError:  # %a in the folder but a whole array asked for
        return JobPaths.get_first_id_independent_folder(template)
