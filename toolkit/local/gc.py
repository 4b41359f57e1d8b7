"""``pctk local gc``: what twins left behind when their state folder went away.

A root twin's MariaDB lives outside its state folder (``toolkit.local.mariadb``: the ``mysql``
account cannot enter a root-only folder such as /root/.local/state), so deleting the state
folder, or a test's temporary one, leaves the data behind; deleting it while the twin runs
leaves every daemon running with nothing that names it. This finds both:

* MariaDB homes under ``/var/lib/pctk/twin-mariadb`` whose ``owner`` file names a state folder
  that holds no twin any more (homes from before the ``owner`` file are kept and listed);
* twin daemons (started with ``PCTK_TWIN_DAEMON=1`` and ``SLURM_CONF=<state>/etc/slurm.conf``
  in their environment) whose state folder is gone, and MariaDB servers (found by their pid
  file, checked against their command line) of homes being removed.

Every process is stopped by its pid (and start time), never by name.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.local import mariadb, procs, state


@dataclass
class Leftovers:
    daemons: list[procs.Proc] = field(default_factory=list)  # their state folder is gone
    homes: list[Path] = field(default_factory=list)  # MariaDB homes of no twin
    unknown: list[Path] = field(default_factory=list)  # homes without an owner file: kept

    def to_json(self) -> dict[str, object]:
        return {"daemons": [{"name": p.name, "pid": p.pid, "state_dir": p.log}
                            for p in self.daemons],
                "homes": [str(h) for h in self.homes],
                "unknown": [str(h) for h in self.unknown]}


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _holds_twin(state_dir: Path) -> bool:
    return state_dir.is_dir() and state.state_file(state_dir).exists()


def _inside(folder: Path, under: Path | None) -> bool:
    return under is None or folder == under or under in folder.parents


def orphan_daemons(under: Path | None = None) -> list[procs.Proc]:
    """Twin daemons whose state folder no longer exists (``log`` holds that folder); with
    ``under``, only those whose folder was there."""
    out = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        env = _environ(pid)
        conf = env.get("SLURM_CONF")
        if env.get("PCTK_TWIN_DAEMON") != "1" or not conf:
            continue
        folder = Path(conf).parent.parent  # <state>/etc/slurm.conf
        if folder.exists() or not _inside(folder, under):
            continue
        ticks = procs.start_ticks(pid)
        if ticks >= 0:
            name = Path(_cmdline(pid)[0] or "?").name
            out.append(procs.Proc(name, pid, ticks, str(folder)))
    return out


def home_server(home: Path) -> procs.Proc | None:
    """The MariaDB server of a home: its pid file's pid, if that process serves this home."""
    db = mariadb.DbLayout("mysql", home)
    try:
        pid = int(db.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if f"--datadir={db.datadir}" not in _cmdline(pid):
        return None
    ticks = procs.start_ticks(pid)
    return procs.Proc("mariadbd", pid, ticks, str(home)) if ticks >= 0 else None


def find(homes: Path = mariadb.ROOT_HOMES, under: Path | None = None) -> Leftovers:
    """What twins that are gone left behind; with ``under``, only twins that lived there."""
    found = Leftovers(daemons=orphan_daemons(under))
    for home in sorted(homes.iterdir()) if homes.is_dir() else []:
        if not home.is_dir():
            continue
        try:
            owner = Path((home / mariadb.OWNER_FILE).read_text().strip())
        except OSError:
            if under is None:
                found.unknown.append(home)
            continue
        if _inside(owner, under) and not _holds_twin(owner):
            found.homes.append(home)
    return found


def collect(homes: Path = mariadb.ROOT_HOMES,
            under: Path | None = None) -> tuple[Leftovers, list[procs.Proc]]:
    """Stop the orphaned daemons and remove the orphaned homes; returns what was found and
    the processes that would not stop (their homes are kept)."""
    found = find(homes, under)
    servers = [s for s in (home_server(h) for h in found.homes) if s is not None]
    pids = {p.pid for p in found.daemons}
    stubborn = procs.stop(found.daemons + [s for s in servers if s.pid not in pids])
    left = {p.log for p in stubborn}
    for home in found.homes:
        if str(home) not in left:
            shutil.rmtree(home, ignore_errors=True)
    return found, stubborn
