"""The results database: every result record plus its raw logs, in one SQLite file.

Where: ``--db``, else ``$PCTK_RESULTS_DB``, else ``<state home>/results.db``. A team can
point everyone at one file on shared storage (``/fsx/pctk/results.db``).

Journal mode is chosen per path. WAL needs shared memory between all processes that open
the file, which network filesystems (Lustre, NFS, CIFS, ...) cannot give, so there we use
the classic rollback journal (``DELETE``) and rely on file locks plus a busy timeout
(Lustre must be mounted with ``-o flock`` for locks to be coherent across clients). On
local disks WAL lets readers run while a writer ingests.

Raw logs are files, not blobs: each is copied once into a content-addressed folder beside
the database (``results.db`` -> ``results.logs/<sha256[:2]>/<sha256>``), so identical logs
are stored once, the database stays small enough to copy, and a log can be read with
``less``. The ``raw_logs`` table maps each result to the original file names and hashes.
A log is copied through a temporary file named after its writer (host and pid); what a
killed writer left is removed by the next :meth:`ResultStore.add` (:func:`clean_stale_incoming`).

Permissions: logs can hold host names, paths and environment dumps, so the store is
private by default: folders it creates are 0700, files 0600 (less whatever the umask
removes). ``PCTK_RESULTS_SHARED=1`` makes them 0777/0666 less the umask instead, for a team
store (``umask 002`` plus a shared group gives 0775/0664). Existing files keep their modes.

Every reader validates each stored record as ``results add`` does; a row it cannot use (an
old version's or another writer's) is skipped and named in :attr:`ResultStore.unusable`.

The schema is versioned: ``schema_migrations`` lists the migrations applied, and opening a
database applies the missing ones in order inside one transaction.

Read-only: a reader (``ResultStore(path, writer=False)``: list, show, report, ...) opens a
database this process cannot write (a read-only mount, an immutable file, another user's
file) read-only, without migrations: ``mode=ro`` when its folder can be written (SQLite may
still make the ``-shm`` file a WAL reader needs), ``immutable=1`` when it cannot (no lock,
no ``-shm``: the file must not change while it is read, which a read-only mount gives; what a
writer elsewhere left in an unmerged ``-wal`` is not seen). A schema older than this pctk's
is then an error, not a migration. A writer is told in one line that the file is read-only.
"""

from __future__ import annotations

import builtins
import datetime as dt
import errno
import hashlib
import os
import re
import secrets
import socket
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.record import (
    RecordError,
    check_created,
    dumps_record,
    loads_record,
    validate_record,
)
from toolkit.errors import PctkError
from toolkit.paths import results_db, results_db_file
from toolkit.results.rawlogs import (
    MAX_RAW_LOG_BYTES,
    LogRefused,
    RawLog,
    display_name,
    open_raw_log,
)

ENV_DB = "PCTK_RESULTS_DB"
ENV_SHARED = "PCTK_RESULTS_SHARED"
BUSY_TIMEOUT_MS = 30_000

# Append only: a released migration is never edited, a change is a new entry.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE results (
        id            TEXT PRIMARY KEY,
        kind          TEXT NOT NULL,
        created       TEXT NOT NULL,
        cluster       TEXT NOT NULL DEFAULT '',
        instance_type TEXT NOT NULL DEFAULT '',
        nodes         INTEGER,
        status        TEXT NOT NULL,
        record        TEXT NOT NULL,
        ingested      TEXT NOT NULL
    );
    CREATE INDEX results_by_group ON results (cluster, instance_type, kind, created);
    CREATE INDEX results_by_created ON results (created);
    CREATE TABLE raw_logs (
        result_id TEXT NOT NULL REFERENCES results(id) ON DELETE CASCADE,
        name      TEXT NOT NULL,
        sha256    TEXT NOT NULL,
        size      INTEGER NOT NULL,
        PRIMARY KEY (result_id, name)
    );
    """,
    """
    CREATE TABLE baselines (
        cluster       TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        kind          TEXT NOT NULL,
        result_id     TEXT NOT NULL REFERENCES results(id) ON DELETE CASCADE,
        set_at        TEXT NOT NULL,
        PRIMARY KEY (cluster, instance_type, kind)
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "lustre", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "gpfs",
     "beegfs", "9p", "afs", "fuse.sshfs", "fuse.s3fs", "fuse.mountpoint-s3", "efs"}
)


@dataclass(frozen=True)
class StoredLog:
    name: str
    sha256: str
    size: int
    path: Path


def default_db_path() -> Path:
    return results_db()


def filesystem_type(path: Path) -> str:
    """The filesystem type holding ``path`` from /proc/mounts ('' where unknown)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return ""
    target = str(path.resolve())
    best, fstype = "", ""
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, fstype = mount, fields[2]
    return fstype


def journal_mode_for(path: Path) -> str:
    fstype = filesystem_type(path.parent)
    return "DELETE" if fstype in NETWORK_FILESYSTEMS else "WAL"


def shared_store() -> bool:
    return os.environ.get(ENV_SHARED, "").strip().lower() in ("1", "true", "yes")


def store_modes() -> tuple[int, int]:
    """(folder mode, file mode) for what the store creates; the umask still applies."""
    return (0o777, 0o666) if shared_store() else (0o700, 0o600)


def printable(text: str, width: int = 64) -> str:
    """A stored id or name for a one-line message: escapes, at most ``width`` characters."""
    shown = text if text.isprintable() else repr(text)[1:-1]
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def utc_iso(value: str | dt.datetime) -> str:
    """Normalise a timestamp to ``YYYY-MM-DDTHH:MM:SSZ`` (UTC) so text order is time order."""
    if isinstance(value, str):
        text = value
        try:
            value = check_created(text)
        except RecordError:
            raise RecordError(f"timestamp {printable(text, 40)!r} is not an ISO 8601 time "
                              "in a sane range") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_RELATIVE = re.compile(r"^(\d+)([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: dt.datetime | None = None) -> str:
    """``7d``/``24h``/``30m`` before now, or an ISO date/time; returned as :func:`utc_iso`."""
    try:
        if m := _RELATIVE.match(text.strip()):
            now = now or dt.datetime.now(dt.UTC)
            return utc_iso(now - dt.timedelta(seconds=int(m[1]) * _UNIT_SECONDS[m[2]]))
        return utc_iso(text)
    except (RecordError, OverflowError):
        raise PctkError(
            f"--since {text!r} is neither a duration nor a date",
            "use e.g. 7d, 12h or 2026-01-31T00:00:00Z",
        ) from None


def group_key(record: dict[str, Any]) -> tuple[str, str]:
    """(cluster name, instance type) with '' for unknown: baselines and comparisons key on it."""
    cluster = record.get("cluster") or {}
    return (str(cluster.get("name") or ""), str(cluster.get("instance_type") or ""))


# .incoming.<host>.<pid>.<random>.tmp: a log being copied in, named after its writer so the
# next writer can tell a dead writer's leftover (SIGKILL, power loss) from a copy under way
_INCOMING = re.compile(r"\.incoming\.(?:(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.)?[0-9a-f]{16}\.tmp")
# a leftover whose writer cannot be checked (another host of a shared store, an older pctk's
# name) goes once it has not been written to for this long; a copy under way writes each MiB
STALE_SECONDS = 24 * 3600


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:64] or "host"


def _create_file(folder: Path, prefix: str) -> tuple[int, Path]:
    """A new temporary file in ``folder`` with the store's file mode (umask applied)."""
    tmp = folder / f".{prefix}.{_host_tag()}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 store_modes()[1])
    return fd, tmp


def _writer_gone(pid: int, mtime: float) -> bool:
    """True when no process ``pid`` runs on this host, or it started after the file was
    last written (the pid was reused): the writer is dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat[stat.rfind(")") + 2] in "ZX":
            return True  # killed, not yet reaped
        boot = next(float(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                    if ln.startswith("btime "))
    except FileNotFoundError:
        return True
    except (OSError, StopIteration, ValueError, IndexError):
        return False  # cannot tell: keep it
    started = boot + int(stat[stat.rfind(")") + 2:].split()[19]) / os.sysconf("SC_CLK_TCK")
    return started > mtime + 2  # btime and ticks are whole seconds and 1/100 s


def clean_stale_incoming(folder: Path, now: float | None = None) -> list[Path]:
    """Delete the temporary copies that dead writers left in ``folder``; returns them.

    A writer on this host is dead when its pid no longer runs (or runs another program);
    a leftover of another host or of an older pctk goes after :data:`STALE_SECONDS` unwritten.
    """
    now = time.time() if now is None else now
    host = _host_tag()
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _INCOMING.fullmatch(entry.name)
        if not m:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if m["host"] == host and m["pid"] is not None:
            stale = int(m["pid"]) != os.getpid() and _writer_gone(int(m["pid"]), st.st_mtime)
        else:
            stale = now - st.st_mtime > STALE_SECONDS
        if stale:
            try:
                os.unlink(entry.path)
            except OSError:
                continue  # another writer cleaned it first, or not ours to remove
            removed.append(Path(entry.path))
    return removed


def _copy_hashing(src_fd: int, dest_fd: int, limit: int) -> tuple[str, int]:
    """Copy everything from ``src_fd`` to ``dest_fd``; (sha256, bytes). LogRefused past
    ``limit`` (a file that grew after it was checked)."""
    digest, size = hashlib.sha256(), 0
    while chunk := os.read(src_fd, 1 << 20):
        size += len(chunk)
        if size > limit:
            raise LogRefused(f"grew past the limit of {limit} bytes while being copied")
        digest.update(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(dest_fd, view):]
    return digest.hexdigest(), size


def unwritable_reason(path: Path) -> str | None:
    """Why this process cannot write the existing database ``path`` (or the journal and WAL
    files SQLite makes in its folder), or None when it can. Asked of the kernel (access(2)),
    which also answers for root: a read-only mount (EROFS) or an immutable file (EPERM)."""
    if not os.access(path, os.W_OK):
        try:  # the kernel's own reason; opening for writing without O_TRUNC changes nothing
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))
        except OSError as exc:
            return f"the file: {exc.strerror}"
        return "the file: permission denied"
    if not os.access(path.parent, os.W_OK):
        return f"its folder: {os.strerror(_folder_errno(path.parent))}"
    return None


def _folder_errno(folder: Path) -> int:
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return errno.EROFS
    except OSError:
        pass
    return errno.EACCES


class ResultStore:
    """Result records and raw logs in SQLite. Open, use, :meth:`close` (or ``with``).

    ``writer=False``: the caller only reads; a database it cannot write is opened read-only
    (:attr:`read_only`) instead of failing.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 writer: bool = True) -> None:
        self.path = results_db_file(Path(path)) if path is not None else default_db_path()
        self.logs_dir = self.path.with_suffix(".logs")
        self.unusable: dict[str, str] = {}  # stored record id -> why a reader skipped it
        self.read_only = False
        if self.path.exists() and (why := unwritable_reason(self.path)):
            if writer:
                raise PctkError(f"{self.path}: cannot write the results database ({why})",
                                f"point --db / ${ENV_DB} at a file you can write")
            self._open_read_only()
            return
        dir_mode, file_mode = store_modes()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=dir_mode)
            # SQLite would create the file 0644; its -wal/-shm/-journal copy this file's mode.
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                             file_mode))
        except FileExistsError:
            pass
        except OSError as exc:
            raise PctkError(f"{self.path}: cannot create the results database "
                            f"({exc.strerror})", "check the path and its permissions") from None
        try:
            self.journal_mode = journal_mode_for(self.path)
            self._conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
            self._conn.row_factory = sqlite3.Row
            # Text columns another writer filled with bad UTF-8 must not stop every query.
            self._conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute(f"PRAGMA journal_mode = {self.journal_mode}")
            migrate(self._conn)
        except sqlite3.DatabaseError as exc:
            raise PctkError(
                f"{self.path}: cannot open the results database ({exc})",
                f"check the path, or point --db / ${ENV_DB} at another file",
            ) from None

    def _open_read_only(self) -> None:
        self.read_only = True
        query = "mode=ro" if os.access(self.path.parent, os.W_OK) else "immutable=1"
        try:
            self._conn = sqlite3.connect(f"{self.path.absolute().as_uri()}?{query}", uri=True,
                                         timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            self._conn.row_factory = sqlite3.Row
            self._conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self.journal_mode = str(self._conn.execute("PRAGMA journal_mode").fetchone()[0])
            version = stored_version(self._conn)
        except sqlite3.DatabaseError as exc:
            raise PctkError(f"{self.path}: cannot read the results database read-only ({exc})",
                            f"check the path, or point --db / ${ENV_DB} at another file"
                            ) from None
        try:
            check_not_newer(version)
            if version < SCHEMA_VERSION:
                what = (f"schema version {version} is older than this pctk reads "
                        f"({SCHEMA_VERSION})" if version else "holds no results tables")
                raise PctkError(
                    f"{self.path}: the results database {what}, and it is read-only here, so "
                    "it cannot be migrated",
                    "open it once where it can be written (any `pctk results list`), or "
                    "copy it somewhere writable and pass the copy with --db")
        except PctkError:
            self._conn.close()
            raise

    def _require_writable(self) -> None:
        if self.read_only:
            raise PctkError(f"{self.path}: the results database is open read-only",
                            f"point --db / ${ENV_DB} at a file you can write")

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front, so two ingesters wait (busy timeout)
        # instead of failing halfway with "database is locked".
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def schema_version(self) -> int:
        return stored_version(self._conn) if self.read_only else current_version(self._conn)

    # --- records -------------------------------------------------------------------------

    def add(self, record: dict[str, Any], raw_logs: Sequence[RawLog | str] = ()) -> str:
        """Store a validated record and copies of its raw logs; returns the record id.

        A log given as a path is the caller's choice; a :class:`NamedLog` is one a record
        named, opened only inside the record's folder (see :mod:`toolkit.results.rawlogs`).
        Adding a record whose id is already stored changes nothing (ingestion is
        idempotent, so a driver can re-ingest a whole folder). So does a record of a kind
        already stored from the very same raw logs (by content, sha256): the same nccl-tests
        log parsed twice is one result, not two that skew trends and baselines; the id
        returned is then the stored one.
        """
        validate_record(record)
        self._require_writable()
        clean_stale_incoming(self.logs_dir)  # what a killed writer left behind
        rid = record["id"]
        if self.has(rid):
            return rid
        created = utc_iso(record["created"])
        cluster, instance_type = group_key(record)
        nodes = (record.get("cluster") or {}).get("nodes")
        logs = [self._keep_log(p if isinstance(p, RawLog) else Path(p)) for p in raw_logs]
        if logs and (same := self.stored_from(record["kind"], {sha for _, sha, _ in logs})):
            return same
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO results (id, kind, created, cluster, instance_type, nodes, status,"
                " record, ingested) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rid, record["kind"], created, cluster, instance_type,
                 nodes if isinstance(nodes, int) else None, record["verdict"]["status"],
                 dumps_record(record), utc_iso(dt.datetime.now(dt.UTC))),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO raw_logs (result_id, name, sha256, size)"
                " VALUES (?, ?, ?, ?)",
                [(rid, name, sha, size) for name, sha, size in logs],
            )
        return rid

    def stored_from(self, kind: str, hashes: set[str]) -> str | None:
        """The id of a stored ``kind`` result whose raw logs are exactly these contents."""
        marks = ",".join("?" * len(hashes))
        rows = self._conn.execute(
            "SELECT l.result_id AS rid, l.sha256 AS sha FROM raw_logs l JOIN results r ON "
            "r.id = l.result_id WHERE r.kind = ? AND l.result_id IN (SELECT result_id FROM "
            f"raw_logs WHERE sha256 IN ({marks})) ORDER BY r.created",
            (kind, *sorted(hashes))).fetchall()
        found: dict[str, set[str]] = {}
        for row in rows:
            found.setdefault(row["rid"], set()).add(row["sha"])
        return next((rid for rid, shas in found.items() if shas == hashes), None)

    def _keep_log(self, src: RawLog) -> tuple[str, str, int]:
        try:
            src_fd = open_raw_log(src)
        except LogRefused as exc:
            raise PctkError(f"raw log {printable(str(src), 200)}: {exc}",
                            "only regular files inside the record's folder are kept") from None
        except OSError as exc:
            raise PctkError(f"raw log {printable(str(src), 200)}: {exc.strerror}",
                            "pass existing log files, or drop them from the record") from None
        try:
            return (display_name(src), *self._copy_in(src_fd))
        except LogRefused as exc:
            raise PctkError(f"raw log {printable(str(src), 200)}: {exc}",
                            "copy the log when it is complete") from None
        finally:
            os.close(src_fd)

    def _copy_in(self, src_fd: int) -> tuple[str, int]:
        """Copy an open log into the content-addressed folder; (sha256, size)."""
        dir_mode, _ = store_modes()
        self.logs_dir.mkdir(exist_ok=True, mode=dir_mode)
        fd, tmp = _create_file(self.logs_dir, "incoming")
        try:
            try:
                sha, size = _copy_hashing(src_fd, fd, MAX_RAW_LOG_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
            dest = self.logs_dir / sha[:2] / sha
            if dest.exists():
                tmp.unlink()
            else:
                dest.parent.mkdir(exist_ok=True, mode=dir_mode)
                os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return sha, size

    def _decode(self, row_id: str, text: bytes) -> dict[str, Any] | None:
        """The stored record, or None (and a note in :attr:`unusable`) when unusable."""
        reason = self._unusable_reason(row_id, text)
        if isinstance(reason, dict):
            return reason
        self.unusable.setdefault(row_id, reason)
        return None

    @staticmethod
    def _unusable_reason(row_id: str, text: bytes) -> dict[str, Any] | str:
        try:
            record = loads_record(text)
        except RecordError as exc:
            return str(exc)
        if record["id"] != row_id:
            return f"its record says id {printable(record['id'])}"
        return record

    def has(self, rid: str) -> bool:
        row = self._conn.execute("SELECT 1 FROM results WHERE id = ?", (rid,)).fetchone()
        return row is not None

    def resolve_id(self, ref: str) -> str:
        """A full id or a unique prefix (at least 4 characters) -> the full id."""
        if self.has(ref):
            return ref
        if len(ref) >= 4:
            rows = self._conn.execute(
                "SELECT id FROM results WHERE id LIKE ? ESCAPE '\\' LIMIT 2",
                (ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",),
            ).fetchall()
            if len(rows) == 1:
                return str(rows[0]["id"])
            if len(rows) > 1:
                raise PctkError(f"result id prefix {ref!r} is ambiguous", "give more characters")
        raise PctkError(f"no result with id {ref!r} in {self.path}",
                        "see `pctk results list` for the ids")

    def get(self, rid: str) -> dict[str, Any]:
        """The record; PctkError when it is not stored or cannot be used."""
        full = self.resolve_id(rid)
        row = self._conn.execute(
            "SELECT id, CAST(record AS BLOB) AS record FROM results WHERE id = ?", (full,)
        ).fetchone()
        reason = self._unusable_reason(row["id"], row["record"])
        if isinstance(reason, str):
            raise PctkError(f"stored result {printable(full)} cannot be used: {reason}",
                            "re-ingest it from its record file with a current pctk")
        return reason

    def logs(self, rid: str) -> builtins.list[StoredLog]:
        rows = self._conn.execute(
            "SELECT name, sha256, size FROM raw_logs WHERE result_id = ? ORDER BY name",
            (self.resolve_id(rid),),
        ).fetchall()
        return [StoredLog(r["name"], r["sha256"], r["size"],
                          self.logs_dir / r["sha256"][:2] / r["sha256"]) for r in rows]

    def list(
        self,
        kind: str | None = None,
        cluster: str | None = None,
        instance_type: str | None = None,
        since: str | dt.datetime | None = None,
        limit: int | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Records, newest first, filtered on whatever is given."""
        return builtins.list(self.each(kind, cluster, instance_type, since, limit))

    def each(
        self,
        kind: str | None = None,
        cluster: str | None = None,
        instance_type: str | None = None,
        since: str | dt.datetime | None = None,
        limit: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """What :meth:`list` returns, one record at a time: a reader that summarises a long
        history holds one record, not all of them."""
        where: builtins.list[str] = []
        args: builtins.list[Any] = []
        for column, value in (("kind", kind), ("cluster", cluster),
                              ("instance_type", instance_type)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if since is not None:
            where.append("created >= ?")
            args.append(utc_iso(since))
        sql = "SELECT id, CAST(record AS BLOB) AS record FROM results"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created DESC, ingested DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        for row in self._conn.execute(sql, args):
            if (record := self._decode(row["id"], row["record"])) is not None:
                yield record

    def latest(self, kind: str) -> builtins.list[dict[str, Any]]:
        """The newest record of ``kind`` for each (cluster, instance type)."""
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        for record in self.list(kind=kind):
            seen.setdefault(group_key(record), record)
        return [seen[key] for key in sorted(seen)]

    def group_kinds(self, kind: str) -> builtins.list[tuple[str, str]]:
        """The (cluster, instance type) pairs holding results of ``kind``, without decoding."""
        rows = self._conn.execute(
            "SELECT DISTINCT cluster, instance_type FROM results WHERE kind = ?"
            " ORDER BY cluster, instance_type", (kind,)).fetchall()
        return [(r["cluster"], r["instance_type"]) for r in rows]

    def newest_first(self, kind: str, cluster: str, instance_type: str
                     ) -> Iterator[dict[str, Any]]:
        """Usable records of one group, newest first, each decoded only when consumed: a
        reader that needs the last few runs of a long history validates only those."""
        cursor = self._conn.execute(
            "SELECT id, CAST(record AS BLOB) AS record FROM results"
            " WHERE kind = ? AND cluster = ? AND instance_type = ?"
            " ORDER BY created DESC, ingested DESC", (kind, cluster, instance_type))
        for row in cursor:
            if (record := self._decode(row["id"], row["record"])) is not None:
                yield record

    # --- baselines -----------------------------------------------------------------------

    def set_baseline(self, rid: str) -> tuple[str, str, str]:
        """Make a result the baseline of its (cluster, instance type, kind); returns that key."""
        self._require_writable()
        record = self.get(rid)
        key = (*group_key(record), record["kind"])
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO baselines (cluster, instance_type, kind, result_id,"
                " set_at) VALUES (?, ?, ?, ?, ?)",
                (*key, record["id"], utc_iso(dt.datetime.now(dt.UTC))),
            )
        return key

    def baseline(self, cluster: str | None, instance_type: str | None,
                 kind: str) -> dict[str, Any] | None:
        """The baseline record, or None (none set, or it cannot be used: see unusable)."""
        row = self._conn.execute(
            "SELECT r.id, CAST(r.record AS BLOB) AS record FROM baselines b"
            " JOIN results r ON r.id = b.result_id"
            " WHERE b.cluster = ? AND b.instance_type = ? AND b.kind = ?",
            (cluster or "", instance_type or "", kind),
        ).fetchone()
        return self._decode(row["id"], row["record"]) if row else None

    def usable(self, rid: str) -> bool:
        """Whether the stored record ``rid`` can be read (else it is named in unusable)."""
        row = self._conn.execute(
            "SELECT id, CAST(record AS BLOB) AS record FROM results WHERE id = ?", (rid,)
        ).fetchone()
        return row is not None and self._decode(row["id"], row["record"]) is not None

    def baselines(self) -> builtins.list[dict[str, str]]:
        rows = self._conn.execute(
            "SELECT cluster, instance_type, kind, result_id, set_at FROM baselines"
            " ORDER BY cluster, instance_type, kind"
        ).fetchall()
        return [dict(r) for r in rows]


def current_version(conn: sqlite3.Connection) -> int:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
        " applied TEXT NOT NULL)"
    )
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def stored_version(conn: sqlite3.Connection) -> int:
    """The schema version, without creating anything (a read-only connection)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                    "name = 'schema_migrations'").fetchone() is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def check_not_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise PctkError(
            f"results database schema version {version} is newer than this pctk "
            f"understands ({SCHEMA_VERSION})",
            "upgrade pctk, or use another --db",
        )


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply the missing migrations up to ``target``; returns the version reached."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = current_version(conn)
        check_not_newer(version)
        for number in range(version + 1, target + 1):
            for statement in MIGRATIONS[number - 1].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, applied) VALUES (?, ?)",
                (number, utc_iso(dt.datetime.now(dt.UTC))),
            )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return max(version, target)
