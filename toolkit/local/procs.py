"""Start and stop the twin's daemons by pid, never by name.

A daemon is identified by its pid *and* its start time (field 22 of /proc/<pid>/stat), so a
recycled pid is never mistaken for ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    name: str
    pid: int
    start_ticks: int
    log: str

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "pid": self.pid, "start_ticks": self.start_ticks,
                "log": self.log}

    @classmethod
    def from_json(cls, d: dict[str, object]) -> Proc:
        return cls(str(d["name"]), int(str(d["pid"])), int(str(d["start_ticks"])), str(d["log"]))


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a pid, or None if it does not exist."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name (field 2) may hold spaces or parentheses: split after the last ')'
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[19])


def start_ticks(pid: int) -> int:
    st = _stat(pid)
    return st[1] if st else -1


def is_running(proc: Proc) -> bool:
    st = _stat(proc.pid)
    if st is None or st[1] != proc.start_ticks:
        return False
    if st[0] in ("Z", "X"):
        _reap(proc.pid)
        return False
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def spawn(name: str, argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> Proc:
    """Start a daemon in the foreground of its own session, output to ``log``."""
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # private whatever the umask: daemons print paths, hosts and errors
    with open(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600),
              "ab") as out:
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    return Proc(name, p.pid, start_ticks(p.pid), str(log))


def stop(procs: list[Proc], timeout: float = 15.0) -> list[Proc]:
    """SIGTERM every running proc, wait, SIGKILL the stubborn; returns those still alive."""
    alive = [p for p in procs if is_running(p)]
    for p in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if is_running(p)]
    return kill(alive)


def freeze(procs: list[Proc]) -> None:
    """SIGSTOP every running proc: none runs another instruction until it is killed."""
    for p in procs:
        if is_running(p):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGSTOP)


def kill(procs: list[Proc]) -> list[Proc]:
    """SIGKILL every running proc at once (no handler runs: a machine that fails says nothing
    to anyone); returns those still alive after a few seconds."""
    alive = [p for p in procs if is_running(p)]
    # all stopped first, then all killed: killed one by one, a shell whose child died first
    # could run its next command (write a file, report to slurmctld) before its own turn
    freeze(alive)
    for p in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if is_running(p)]
    return alive


def sharing_uts_namespace(pid: int) -> list[Proc]:
    """Every process in the UTS namespace of ``pid``, ``pid`` first, when that namespace is
    not this process's own; else none (the processes of one host name cannot be told apart).

    A twin node's slurmd runs in a UTS namespace of its own (its host name, see
    ``power.start_slurmd``), and the job steps and tasks it starts inherit it: these are the
    node's processes, as a machine's would be."""
    try:
        mine = os.readlink("/proc/self/ns/uts")
        theirs = os.readlink(f"/proc/{pid}/ns/uts")
    except OSError:
        return []
    if theirs == mine:
        return []
    found = [Proc("node", pid, start_ticks(pid), "")]
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != pid:
            with contextlib.suppress(OSError):
                if os.readlink(d / "ns" / "uts") == theirs:
                    found.append(Proc("node", int(d.name), start_ticks(int(d.name)), ""))
    return found


def left_in(folder: Path, program: str) -> list[Proc]:
    """Every running ``program`` (its process name: Debian's slurmstepd runs as
    slurmstepd-wlm) whose working folder is ``folder``, each followed by its descendants: what
    the twin's daemons started there and left behind. A slurmstepd outlives a slurmd stopped
    under its job step, as on a real node."""
    here = str(folder.resolve())
    found: list[Proc] = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if (d / "comm").read_text().strip() != program or \
                    os.readlink(d / "cwd").removesuffix(" (deleted)") != here:
                continue
            found.append(Proc(program, int(d.name), start_ticks(int(d.name)), ""))
    return [q for p in found for q in (p, *descendants(p.pid))]


def descendants(pid: int) -> list[Proc]:
    """The processes below ``pid``, parents before children."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                raw = (d / "stat").read_text()
                ppid = int(raw[raw.rfind(")") + 2:].split()[1])
                children.setdefault(ppid, []).append(int(d.name))
    out: list[Proc] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop(0)
        out.append(Proc("child", child, start_ticks(child), ""))
        todo += children.get(child, [])
    return out


def tail(path: str | Path, lines: int = 5) -> str:
    try:
        text = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])
