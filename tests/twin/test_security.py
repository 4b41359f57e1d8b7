"""What the running twin exposes to other local users and to the network."""

from __future__ import annotations

import ipaddress
import os
import pwd
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.twinutil import TwinHandle
from toolkit.local import mariadb
from toolkit.local.plan import resolve_host_address

pytestmark = pytest.mark.twin

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="acting as another user needs root and setpriv")


def _daemon(twin: TwinHandle, name: str) -> dict[str, object]:
    return next(d for d in twin.twin.status().daemons if d["name"] == name)


def _uids(pid: object) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no Uid line for pid {pid}")


def _mysql_port(twin: TwinHandle) -> int:
    conf = (twin.state_dir / "etc" / "slurmdbd.conf").read_text()
    return int(next(ln.split("=", 1)[1] for ln in conf.splitlines()
                    if ln.startswith("StoragePort=")))


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AS_NOBODY, *argv], capture_output=True, text=True, timeout=30,
                          cwd="/")


def test_mariadb_runs_unprivileged_in_a_private_folder(twin):
    db = mariadb.layout(twin.state_dir)
    owner = pwd.getpwnam(db.owner)
    uids = _uids(_daemon(twin, "mariadbd")["pid"])
    assert 0 not in uids and set(uids) == {owner.pw_uid}
    for folder in (db.home, db.datadir, db.files_dir):
        st = folder.stat()
        assert st.st_uid == owner.pw_uid, folder
        assert st.st_mode & 0o777 == 0o700, f"{folder}: {oct(st.st_mode)}"
    assert db.socket.parent == db.home and db.socket.is_socket()


def test_mariadb_has_no_file_io_and_no_remote_root(twin):
    outfile = Path("/tmp") / f"pctk-outfile-{uuid.uuid4().hex}"
    db = mariadb.layout(twin.state_dir)
    r = subprocess.run(mariadb.client_argv(
        db, "SELECT @@local_infile, @@secure_file_priv; "
            "SELECT User, Host FROM mysql.global_priv WHERE User IN ('root', '');"),
        capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    local_infile, file_priv = lines[1].split("\t")
    assert local_infile == "0" and file_priv.rstrip("/") == str(db.files_dir)
    assert lines[2:] == ["User\tHost", "root\tlocalhost"]
    # even the database's own admin cannot write outside its private folder
    r = subprocess.run(mariadb.client_argv(db, f"SELECT 'x' INTO OUTFILE '{outfile}'"),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "secure-file-priv" in r.stderr
    assert not outfile.exists()


@needs_root
def test_another_local_user_cannot_reach_mariadb_as_root(twin):
    db = mariadb.layout(twin.state_dir)
    port = str(_mysql_port(twin))
    outfile = Path("/tmp") / f"pctk-outfile-{uuid.uuid4().hex}"
    sql = f"SELECT 'x' INTO OUTFILE '{outfile}'"
    attempts = {
        "socket": ["--socket", str(db.socket)],
        "tcp": ["-h", "127.0.0.1", "-P", port],
        "tcp, empty password": ["-h", "127.0.0.1", "-P", port, "--password="],
    }
    for how, where in attempts.items():
        r = _as_nobody("mariadb", "--no-defaults", *where, "-u", "root", "-e", sql)
        assert r.returncode != 0, f"nobody connected as root via {how}"
        assert "ERROR" in r.stderr, r.stderr
    assert not outfile.exists()
    # nor can nobody learn slurmdbd's database password
    conf = twin.state_dir / "etc" / "slurmdbd.conf"
    assert _as_nobody("cat", str(conf)).returncode != 0
    assert _as_nobody("cat", str(twin.state_dir / "mysql" / "slurm.password")).returncode != 0


def test_slurmdbd_conf_is_private_to_slurm_user(twin):
    conf = twin.state_dir / "etc" / "slurmdbd.conf"
    slurm_user = next(ln.split("=", 1)[1] for ln in conf.read_text().splitlines()
                      if ln.startswith("SlurmUser="))
    st = conf.stat()
    assert st.st_mode & 0o777 == 0o600
    assert st.st_uid == pwd.getpwnam(slurm_user).pw_uid


def _listening(pids: set[int]) -> list[tuple[int, str]]:
    """(pid, local address) of every TCP listening socket of these pids, from ss."""
    out = subprocess.run(["ss", "-H", "-ltnp"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        local = fields[3]
        for pid in pids:
            if f"pid={pid}," in line:
                found.append((pid, local.rsplit(":", 1)[0].strip("[]")))
    return found


def test_every_daemon_listens_on_loopback_only(twin):
    if resolve_host_address() != "127.0.0.1":
        pytest.skip("this host's name does not resolve to 127.0.0.1: Slurm 22.05 then binds "
                    "0.0.0.0 (see the note `pctk local up` prints)")
    daemons = {d["pid"]: d["name"] for d in twin.twin.status().daemons}
    listening = _listening(set(daemons))
    names = {daemons[pid] for pid, _ in listening}
    tcp_daemons = {n for n in daemons.values() if n != "munged"}
    assert names == tcp_daemons  # every daemon seen, so the check covers them all
    exposed = [(daemons[pid], addr) for pid, addr in listening
               if addr in ("*", "") or not ipaddress.ip_address(addr).is_loopback]
    assert exposed == []
