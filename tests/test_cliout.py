"""The one console every command prints with: in a pipe, log lines are plain
``[time] message`` (`local up` lines ended in rich's ``cli.py:134``, padded to the width)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

SCRIPT = """
from toolkit.cliout import console
c = console(stderr=True)
c.log("starting the twin")
c.log("nodes idle")
"""


def test_log_lines_in_a_pipe_are_plain() -> None:
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 2
    assert all(re.fullmatch(r"\[\d\d:\d\d:\d\d\] (starting the twin|nodes idle)", line)
               for line in lines), lines


def test_log_lines_on_a_terminal_name_no_source_file() -> None:
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-c", SCRIPT], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=follower, timeout=60)
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
    assert proc.returncode == 0
    text = out.decode()
    assert "starting the twin" in text and "<string>" not in text and ".py:" not in text


def test_a_rule_in_a_pipe_is_a_terminals_width_not_the_tables() -> None:
    # `make demo > log` printed each section rule as one line of thousands of dashes
    script = ("from rich.rule import Rule\nfrom toolkit.cliout import console\n"
              "c = console()\nc.print(Rule('[bold]results[/]'))\nc.print(Rule())\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and all(len(line) == 80 for line in lines), lines
    assert " results " in lines[0] and "[bold]" not in lines[0] and "\x1b" not in r.stdout
