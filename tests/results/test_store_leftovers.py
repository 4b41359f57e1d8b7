"""A `results add` killed mid-copy leaves a temporary file; the next write removes it, and
only it: a copy under way (a live writer) or another host's recent one stays."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.record import write_record
from toolkit.results.store import ResultStore

from . import records

REPO = Path(__file__).resolve().parents[2]
DAY = 24 * 3600  # a leftover whose writer cannot be checked goes after a day unwritten


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:64]


def _record_with_log(folder: Path, log_bytes: int) -> Path:
    folder.mkdir(parents=True)
    log = folder / "train.log"
    with open(log, "wb") as fh:
        fh.truncate(log_bytes)  # sparse: quick to make, still copied byte by byte
    rec = records.fsdp_record()
    rec["raw_logs"] = [log.name]
    return write_record(folder / "record.json", rec)


def _leftovers(db: Path) -> list[Path]:
    logs = db.with_suffix(".logs")
    return sorted(logs.glob(".incoming.*")) if logs.is_dir() else []


def _kill_mid_copy(db: Path, record: Path) -> Path:
    """Start `pctk results add`, SIGKILL it once its temporary copy exists."""
    env = {**os.environ, "PCTK_RESULTS_DB": str(db)}
    p = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "results", "add", str(record)],
                         cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and p.poll() is None:
            found = _leftovers(db)
            if found and found[0].stat().st_size > 0:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
                return found[0]
            time.sleep(0.001)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    raise AssertionError(f"no temporary copy seen (exit {p.returncode}): "
                         f"{p.stderr.read().decode() if p.stderr else ''}")


def test_the_next_write_removes_what_a_killed_add_left(tmp_path):
    db = tmp_path / "store" / "results.db"
    ResultStore(db).close()
    left = _kill_mid_copy(db, _record_with_log(tmp_path / "big", 768 << 20))
    assert left.exists() and left.stat().st_size > 0
    # a copy under way on this host (our own pid, alive) and a recent one of another host
    live = left.parent / f".incoming.{_host_tag()}.{os.getpid()}.{'a' * 16}.tmp"
    other = left.parent / f".incoming.other-host.1.{'b' * 16}.tmp"
    old_other = left.parent / f".incoming.other-host.2.{'c' * 16}.tmp"
    old_format = left.parent / f".incoming.{'d' * 16}.tmp"
    for f in (live, other, old_other, old_format):
        f.write_bytes(b"x")
    day_ago = time.time() - DAY - 60
    for f in (old_other, old_format):
        os.utime(f, (day_ago, day_ago))

    small = _record_with_log(tmp_path / "small", 10)
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "results", "add", str(small)],
                       cwd=REPO, env={**os.environ, "PCTK_RESULTS_DB": str(db)},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert _leftovers(db) == sorted([live, other])
