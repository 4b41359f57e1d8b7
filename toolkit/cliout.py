"""The ``--json`` flag, machine output and exit codes, spelled once for every command.

Exit codes (README, "The commands"): ``OK`` 0, ``FAILED`` 1 (a check failed or found
problems), ``UNUSABLE`` 2 (bad input or environment: raise :class:`toolkit.errors.PctkError`,
which :func:`toolkit.cli.main` prints as one line), ``NOT_RUNNING`` 3 (a ``status`` command
whose daemons are stopped; Nagios' UNKNOWN, as ``pctk health`` uses it), ``INTERRUPTED``
130 (Ctrl-C, or stopped waiting for jobs that keep running). A command ends
with :func:`exit_with`; ``typer.Exit`` is the one way out: :func:`toolkit.cli.main` passes
its code on whether click raises it or returns it (``standalone_mode=False``).
"""

from __future__ import annotations

import json
from typing import Any

import typer

OK, FAILED, UNUSABLE, NOT_RUNNING, INTERRUPTED = 0, 1, 2, 3, 130
# README's table of exit codes (tests/test_exit_codes.py holds every command to it)
EXIT_CODES = {OK: "ok", FAILED: "a check failed or found problems",
              UNUSABLE: "unusable input or environment", NOT_RUNNING: "not running",
              INTERRUPTED: "interrupted"}
# the one exception: monitors call it directly (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN)
NAGIOS_COMMANDS = ("pctk health run",)

JSON_HELP = "Print machine-readable JSON (nothing else on stdout)."
# every command spells it ``as_json: bool = JsonOption``
JsonOption: Any = typer.Option(False, "--json", help=JSON_HELP)


def emit_json(obj: Any, *, indent: int | None = 2, sort_keys: bool = True) -> None:
    """One JSON document on stdout (``indent=None``: one line, for piping into jq -c)."""
    typer.echo(json.dumps(obj, indent=indent, sort_keys=sort_keys, default=str))


def exit_with(code: int) -> None:
    """End the command with ``code`` (nothing to do for 0)."""
    if code:
        raise typer.Exit(code)


def fail_if(failed: bool) -> None:
    """Exit ``FAILED`` (1) when a check failed; the findings are already printed."""
    exit_with(FAILED if failed else OK)
