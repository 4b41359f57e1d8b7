"""Open the raw logs a record names without letting the record choose arbitrary files.

A record file may come from anyone who can write to a shared jobs folder, while
``pctk results add`` may run as a user who can read secrets (munge.key, a database
password). So a log named *in a record* is opened only inside the record's own folder: a
relative path without ``..``, each component opened with ``O_NOFOLLOW`` from the folder's
descriptor (a symbolic link anywhere below the folder is refused, even one that points
back inside), and only a regular file of at most :data:`MAX_RAW_LOG_BYTES`. A log passed
explicitly with ``--log`` is the caller's own choice: any path, but still a regular file
under the cap.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MAX_RAW_LOG_BYTES = 1 << 30
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LogRefused(Exception):
    """A raw log that will not be copied; the message says why, in a few words."""


@dataclass(frozen=True)
class NamedLog:
    """A log named by a record: ``name`` relative to the record's ``folder``."""

    folder: Path
    name: str

    def __str__(self) -> str:
        return self.name


RawLog = NamedLog | Path


def display_name(log: RawLog) -> str:
    return Path(log.name).name if isinstance(log, NamedLog) else log.name


def check_relative(name: str) -> PurePosixPath:
    """The name as a path inside the folder, or LogRefused."""
    path = PurePosixPath(name)
    if "\0" in name or not name.strip():
        raise LogRefused("not a file name")
    if path.is_absolute():
        raise LogRefused("an absolute path; only files in the record's folder are kept")
    if ".." in path.parts:
        raise LogRefused("leads out of the record's folder ('..')")
    if not path.parts:
        raise LogRefused("not a file name")
    return path


def _open_named(log: NamedLog) -> int:
    parts = check_relative(log.name).parts
    dir_fd = os.open(log.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            next_fd = _nofollow(part, _DIR_FLAGS, dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
        return _nofollow(parts[-1], _FILE_FLAGS, dir_fd)
    finally:
        os.close(dir_fd)


def _nofollow(part: str, flags: int, dir_fd: int) -> int:
    try:
        return os.open(part, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        # O_DIRECTORY reports a symbolic link as ENOTDIR, so look before naming it
        link = stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        raise LogRefused(f"{part!r} is a symbolic link" if link
                         else f"{part!r} is not a folder") from None


def open_raw_log(log: RawLog, limit: int = MAX_RAW_LOG_BYTES) -> int:
    """A read-only descriptor of a regular file of at most ``limit`` bytes.

    LogRefused for a log that must not be kept, FileNotFoundError for one that is not there,
    other OSErrors as raised.
    """
    fd = _open_named(log) if isinstance(log, NamedLog) else os.open(
        log, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LogRefused("not a regular file")
        if info.st_size > limit:
            raise LogRefused(f"{info.st_size} bytes, more than the limit of {limit}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_raw_log(log: RawLog) -> None:
    """Raise as :func:`open_raw_log` would; the file is not read."""
    os.close(open_raw_log(log))
