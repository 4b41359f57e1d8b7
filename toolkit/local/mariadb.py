"""The twin's MariaDB: unprivileged, private socket, no file I/O, loopback TCP only.

Who runs it: the twin's own user; when the twin is started by root, the ``mysql`` account
that mariadb-server creates (an unprivileged, no-login system account; adding an account of
our own would edit the passwd database of a shared machine). A non-root server cannot enter
a root-only state folder such as /root/.local/state, so a root twin keeps its database in
``/var/lib/pctk/twin-mariadb/<hash of the state folder>``, owned by ``mysql``, mode 0700, with
an ``owner`` file naming that state folder, so ``pctk local gc`` (:mod:`toolkit.local.gc`)
finds the homes whose twin is gone.

Size: a twin's accounting database holds a few thousand job records, so the redo log is 8 MiB
(MariaDB's default: 96 MiB), the buffer pool 16 MiB and the tablespaces grow 4 MiB at a
time: about 35 MB on disk per twin (190 MB with the defaults).

Who can connect: the database's root account authenticates by the client's Unix user
(``unix_socket``) and only through the socket, whose folder is 0700: local users other than
the server's account and the OS root cannot reach the socket, and no root account accepts TCP.
slurmdbd uses its own password account, limited to 127.0.0.1 and the accounting database.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import PctkError
from toolkit.fsutil import atomic_write_text

ROOT_HOMES = Path("/var/lib/pctk/twin-mariadb")
# the state folder a root twin's MariaDB home belongs to (see toolkit.local.gc)
OWNER_FILE = "owner"
# a twin's database: a few MiB of job records (MariaDB's defaults are 96M and 128M)
INNODB_LOG_FILE_SIZE = "8M"
INNODB_BUFFER_POOL_SIZE = "16M"
# the system and temporary tablespaces grow by 4 MiB at a time, not 64 MiB
SMALL_FILES = ("--innodb-autoextend-increment=4",
               "--innodb-temp-data-file-path=ibtmp1:4M:autoextend")
# written once the data folder was initialised this way; older data folders (empty root
# password, root-owned) are recreated
LAYOUT_MARK = "pctk-layout-2"
_HEX_PASSWORD = re.compile(r"[0-9a-f]{32}")
_DATABASE = re.compile(r"slurm_acct_db(_[0-9]+_[0-9]+)?")  # TwinPlan.accounting_db


@dataclass(frozen=True)
class DbLayout:
    owner: str  # the Unix account mariadbd runs as
    home: Path  # 0700, owned by ``owner``: data, socket, pid, log, file-I/O folder
    # a home outside the state folder (root twins): the state folder it belongs to
    state_dir: Path | None = None

    @property
    def datadir(self) -> Path:
        return self.home / "data"

    @property
    def socket(self) -> Path:
        return self.home / "mysqld.sock"

    @property
    def pid_file(self) -> Path:
        return self.home / "mysqld.pid"

    @property
    def log(self) -> Path:
        return self.home / "mysqld.log"

    @property
    def files_dir(self) -> Path:
        """secure_file_priv: an empty folder only the server's account can use."""
        return self.home / "files"


def layout(state_dir: Path) -> DbLayout:
    if os.geteuid() != 0:
        return DbLayout(pwd.getpwuid(os.getuid()).pw_name, state_dir / "mysql")
    key = hashlib.sha256(str(state_dir).encode()).hexdigest()[:16]
    return DbLayout("mysql", ROOT_HOMES / key, state_dir)


def admin_user() -> str:
    """The database account pctk itself uses: the caller's, via the socket (unix_socket)."""
    return pwd.getpwuid(os.geteuid()).pw_name


def prepare(db: DbLayout) -> None:
    """Create the private folders, owned by the server's account."""
    if os.geteuid() == 0:
        ROOT_HOMES.mkdir(parents=True, exist_ok=True)
        os.chmod(ROOT_HOMES.parent, 0o755)
        os.chmod(ROOT_HOMES, 0o755)
    try:
        ent = pwd.getpwnam(db.owner)
    except KeyError:
        raise PctkError(f"no `{db.owner}` account on this machine to run the twin's MariaDB",
                        "install mariadb-server (it creates the account)") from None
    for d in (db.home, db.files_dir):
        d.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(d, ent.pw_uid, ent.pw_gid)
        os.chmod(d, 0o700)
    if db.state_dir is not None:
        atomic_write_text(db.home / OWNER_FILE, f"{db.state_dir}\n", 0o600)


def initialised(db: DbLayout) -> bool:
    return (db.datadir / "mysql").is_dir() and (db.home / LAYOUT_MARK).exists()


def install(db: DbLayout, env: dict[str, str], cwd: Path) -> None:
    argv = ["mariadb-install-db", "--no-defaults", f"--datadir={db.datadir}",
            f"--user={db.owner}", "--auth-root-authentication-method=socket",
            "--skip-test-db", f"--innodb-log-file-size={INNODB_LOG_FILE_SIZE}", *SMALL_FILES]
    for attempt in range(2):
        shutil.rmtree(db.datadir, ignore_errors=True)
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd)
        if r.returncode == 0:
            atomic_write_text(db.home / LAYOUT_MARK, "unix_socket root, private home\n", 0o600)
            return
        atomic_write_text(db.log, r.stdout + r.stderr)
        if attempt == 0:
            time.sleep(1)  # a passing failure (seen under heavy load): try once more
    errors = [ln for ln in (r.stderr + r.stdout).splitlines() if "[ERROR]" in ln]
    detail = (errors or (r.stderr.strip().splitlines() or ["?"]))[0]
    raise PctkError(f"mariadb-install-db failed: {detail}",
                    "check that mariadb-server is installed and the disk has room",
                    log=str(db.log))


def server_argv(db: DbLayout, port: int) -> list[str]:
    return [
        "mariadbd", "--no-defaults", f"--datadir={db.datadir}", f"--user={db.owner}",
        f"--socket={db.socket}", f"--port={port}", "--bind-address=127.0.0.1",
        f"--pid-file={db.pid_file}", f"--log-error={db.log}",
        # no reading or writing of server-side files, no client-side file loading
        f"--secure-file-priv={db.files_dir}", "--local-infile=0", "--skip-symbolic-links",
        "--skip-name-resolve", "--skip-log-bin", "--performance-schema=OFF",
        f"--innodb-buffer-pool-size={INNODB_BUFFER_POOL_SIZE}",
        f"--innodb-log-file-size={INNODB_LOG_FILE_SIZE}", *SMALL_FILES,
        "--innodb-lock-wait-timeout=900",
        "--max-connections=64", "--innodb-flush-log-at-trx-commit=2",
    ]


def client_argv(db: DbLayout, sql: str) -> list[str]:
    return ["mariadb", "--no-defaults", f"--socket={db.socket}", "-u", admin_user(),
            "-e", sql]


def setup_sql(password: str, database: str = "slurm_acct_db") -> str:
    """slurmdbd's database and account; no anonymous or remote accounts left.

    The password goes into a quoted SQL literal: only pctk's own hex passwords are taken."""
    if not _HEX_PASSWORD.fullmatch(password):
        raise PctkError("slurmdbd's database password is not one pctk made (32 hex digits)",
                        "delete mysql/slurm.password in the twin's folder; `pctk local up` "
                        "makes a new one")
    if not _DATABASE.fullmatch(database):
        raise PctkError(f"not a database name pctk makes: {database!r}")
    return (
        "DELETE FROM mysql.global_priv WHERE User='' "
        "OR (User='root' AND Host<>'localhost'); "
        f"CREATE DATABASE IF NOT EXISTS {database}; "
        f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
        f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
        f"GRANT ALL ON {database}.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
    )


def password(state_dir: Path) -> str:
    """slurmdbd's database password, made once per twin (mode 0600)."""
    pw_file = state_dir / "mysql" / "slurm.password"
    if pw_file.exists():
        pw = pw_file.read_text().strip()
        if _HEX_PASSWORD.fullmatch(pw):
            return pw  # anything else (edited, torn): a new one below
    pw = secrets.token_hex(16)
    atomic_write_text(pw_file, pw + "\n", 0o600)
    return pw


def setup(db: DbLayout, password: str, env: dict[str, str],
          database: str = "slurm_acct_db") -> bool:
    """Run :func:`setup_sql` through the socket; False while the server does not answer."""
    argv = client_argv(db, setup_sql(password, database))
    return subprocess.run(argv, capture_output=True, env=env).returncode == 0


def purge(db: DbLayout) -> None:
    shutil.rmtree(db.home, ignore_errors=True)
