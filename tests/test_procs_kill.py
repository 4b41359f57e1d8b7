"""A node that fails dies at once: no process of it runs another command after the first of
them is killed (toolkit.local.procs.kill freezes them all, then kills them all)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from toolkit.local import procs


def test_no_shell_runs_on_after_its_child_is_killed(tmp_path: Path) -> None:
    # 12 shells, each waiting on a sleep and writing a file when the sleep ends; the list
    # names every sleep before any shell, as a scan in pid order would after many forks
    shells = [subprocess.Popen(["bash", "-c", f"sleep 60; echo end > {tmp_path}/{i}"])
              for i in range(12)]
    try:
        sleeps: list[procs.Proc] = []
        deadline = time.monotonic() + 20
        while len(sleeps) < len(shells):
            assert time.monotonic() < deadline, "the sleeps did not start"
            children = (Path(f"/proc/{s.pid}/task/{s.pid}/children") for s in shells)
            pids = [int(c) for f in children for c in f.read_text().split()]
            sleeps = [procs.Proc("sleep", p, procs.start_ticks(p), "") for p in pids]
            time.sleep(0.05)
        victims = sleeps + [procs.Proc("bash", s.pid, procs.start_ticks(s.pid), "")
                            for s in shells]
        assert procs.kill(victims) == []  # reaps them too (they are this process's children)
        assert not any(procs.is_running(v) for v in victims)
        time.sleep(0.5)  # a shell that had escaped would have written by now
        assert sorted(p.name for p in tmp_path.iterdir()) == []
    finally:
        for s in shells:
            if s.poll() is None:
                s.kill()
                s.wait()
