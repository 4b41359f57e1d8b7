"""Atomic file writes (a reader sees the old file or the new one, never half of one) and
bounded reads of regular files."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from toolkit.errors import PctkError

# What pctk creates under its state root: folders only their owner can enter, and the few a
# twin's clients and jobs must pass through (to slurm.conf, the munge socket, a node's spool)
# open to others for passing only, never for listing.
PRIVATE_DIR = 0o700
PASSAGE_DIR = 0o711


def private_dirs(path: str | os.PathLike[str], mode: int = PRIVATE_DIR,
                 parents_mode: int = PASSAGE_DIR) -> Path:
    """Create ``path`` with ``mode`` and its missing parents with ``parents_mode``, whatever
    the umask; folders that exist keep their modes (a user's own choice)."""
    target = Path(path)
    missing: list[Path] = []
    p = target
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        want = mode if d == target else parents_mode
        try:
            d.mkdir(mode=want)
        except FileExistsError:
            continue  # made meanwhile by another process: its mode stays
        os.chmod(d, want)
    return target


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int | None = None) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def require_parent(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """An output file the user named: its folder must exist (a typo'd path is refused, not
    created, as root, somewhere under /)."""
    target = Path(path)
    parent = target.parent
    if not parent.is_dir():
        raise PctkError(f"{option} {target}: folder {parent} does not exist",
                        f"create it first (mkdir -p {parent}) or write somewhere else")
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str, mode: int | None = None) -> Path:
    return atomic_write_bytes(path, text.encode(), mode)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, mode: int | None = None) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n", mode)


DEFAULT_MAX_READ_BYTES = 1 << 30   # 1 GiB: far above any real log or config, far below RAM


class InputTooLarge(ValueError):
    """More bytes than the caller allowed; the message names the file and the limit."""


class NotRegularFile(ValueError):
    """A FIFO, device, socket or directory where a file was expected."""


class _BoundedLines:
    """Text lines of an open binary file, refusing to go past ``max_bytes`` in total."""

    _LINE_CHUNK = 1 << 20   # a line longer than 1 MiB comes back in pieces

    def __init__(self, fh: Any, path: str, max_bytes: int):
        self._fh, self._path, self._max, self._read = fh, path, max_bytes, 0

    def __enter__(self) -> _BoundedLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()

    def __iter__(self) -> _BoundedLines:
        return self

    def __next__(self) -> str:
        chunk = self._fh.readline(self._LINE_CHUNK)
        if not chunk:
            raise StopIteration
        self._read += len(chunk)
        if self._read > self._max:
            raise InputTooLarge(f"{self._path}: more than {self._max} bytes (the read limit)")
        return str(chunk.decode("utf-8", errors="replace"))

    def read(self) -> str:
        """The rest of the file as one string (still bounded)."""
        return "".join(self)


def open_regular_fd(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> int:
    """A read-only descriptor of a regular file.

    Opened non-blocking, so a FIFO with no writer cannot hang the caller; FIFOs, character
    devices (``/dev/zero``), sockets and directories are refused before anything is read,
    and so is a symbolic link unless ``follow_symlinks`` (a job's log that points at
    /etc/shadow). Raises :class:`NotRegularFile` or OSError.
    """
    name = os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags | (0 if follow_symlinks else os.O_NOFOLLOW))
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks and os.path.islink(name):
            raise NotRegularFile(f"{name}: not a regular file (a symbolic link)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{name}: not a regular file ({_kind(st.st_mode)})")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_regular(path: str | os.PathLike[str], max_bytes: int) -> Any:
    """A binary file object for a regular file (:func:`open_regular_fd`) not already over
    ``max_bytes``."""
    name = os.fspath(path)
    fd = open_regular_fd(name)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise InputTooLarge(f"{name}: {size} bytes, above the read limit of "
                                f"{max_bytes} bytes")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_tail(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The last ``max_bytes`` of a regular file, never a symbolic link (the refusals of
    :func:`open_regular_fd`): where a dead job's log says why, whatever its length."""
    fd = open_regular_fd(path, follow_symlinks=False)
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - max_bytes), os.SEEK_SET)
        chunks, left = [], max_bytes
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def file_kind(path: str | os.PathLike[str]) -> str:
    """What ``path`` is when it is not a regular file: 'a FIFO', 'a directory', ... (a
    symbolic link is followed); OSError when nothing is there."""
    return _kind(os.stat(path).st_mode)


def open_regular_text(path: str | os.PathLike[str],
                      max_bytes: int = DEFAULT_MAX_READ_BYTES) -> _BoundedLines:
    """Open a regular file for line-by-line text reading with a cap on bytes read.

    Refuses what :func:`_open_regular` refuses; a file that grows while being read stops at
    the cap. Raises :class:`NotRegularFile`, :class:`InputTooLarge` or OSError.
    """
    return _BoundedLines(_open_regular(path, max_bytes), os.fspath(path), max_bytes)


def read_regular_bytes(path: str | os.PathLike[str],
                       max_bytes: int = DEFAULT_MAX_READ_BYTES) -> bytes:
    """The whole of a regular file of at most ``max_bytes``, with the same refusals as
    :func:`open_regular_text` (a FIFO, a device, a directory, too many bytes)."""
    with _open_regular(path, max_bytes) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputTooLarge(f"{os.fspath(path)}: more than {max_bytes} bytes (the read limit)")
    return bytes(data)


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return what
    return "not a plain file"
