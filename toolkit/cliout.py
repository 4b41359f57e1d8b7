"""The ``--json`` flag, machine output and exit codes, spelled once for every command.

Exit codes (docs/commands.md, "Exit codes"): ``OK`` 0, ``FAILED`` 1 (a check failed or found
problems), ``UNUSABLE`` 2 (bad input or environment: raise :class:`toolkit.errors.PctkError`,
which :func:`toolkit.cli.main` prints as one line), ``NOT_RUNNING`` 3 (a ``status`` command
whose daemons are stopped; Nagios' UNKNOWN, as ``pctk health`` uses it), ``INTERRUPTED``
130 (Ctrl-C, or stopped waiting for jobs that keep running). A command ends
with :func:`exit_with`; ``typer.Exit`` is the one way out: :func:`toolkit.cli.main` passes
its code on whether click raises it or returns it (``standalone_mode=False``).
"""

from __future__ import annotations

import io
import json
import sys
from datetime import datetime
from typing import Any

import typer
from rich import box
from rich.console import Console

# what a table looks like in a pipe or a log: columns separated by spaces, a dashed line under
# the header, nothing else (grep and awk read it; no box drawing characters)
PLAIN_BOX = box.Box(
    "    \n"
    "    \n"
    " -  \n"
    "    \n"
    "    \n"
    " -  \n"
    "    \n"
    "    \n",
    ascii=True,
)
# wide enough that no table is wrapped or cut in a pipe: a log line is as long as its row
PIPE_WIDTH = 100_000

OK, FAILED, UNUSABLE, NOT_RUNNING, INTERRUPTED = 0, 1, 2, 3, 130
# docs/commands.md's table of exit codes (tests/test_exit_codes.py holds every command to it)
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


RULE_WIDTH = 80  # a rule's width in a pipe or a log


class _PipeConsole(Console):
    """A Console for output that is not a terminal: full-width plain tables, no trailing
    blanks, log lines as ``[time] message``."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        from rich.rule import Rule
        from rich.table import Table

        if self.quiet:
            return
        if any(isinstance(obj, Rule) for obj in objects):
            # a rule fills the console's width: at the pipe's width it would be one line of
            # thousands of dashes in a log; drawn at a terminal's usual 80 columns instead
            objects = tuple(self._narrow(obj) if isinstance(obj, Rule) else obj
                            for obj in objects)
        for obj in objects:
            if isinstance(obj, Table):
                obj.box = PLAIN_BOX
                obj.show_edge = False
                obj.expand = False
                for column in obj.columns:  # the width is there: never cut a cell
                    column.no_wrap = True
                    column.overflow = "ignore"
        with self.capture() as captured:
            super().print(*objects, **kwargs)
        text = "\n".join(line.rstrip() for line in captured.get().split("\n"))
        self.file.write(text)
        self.file.flush()

    @staticmethod
    def _narrow(rule: Any) -> str:
        narrow = Console(width=RULE_WIDTH, file=io.StringIO(), color_system=None)
        with narrow.capture() as captured:
            narrow.print(rule)
        return captured.get().rstrip("\n")

    def log(self, *objects: Any, **kwargs: Any) -> None:
        """``[12:00:01] message``: rich pads a log line to the console's width."""
        stamp = datetime.now().strftime("[%X]")
        self.print(stamp, *objects, sep=kwargs.get("sep", " "), end=kwargs.get("end", "\n"),
                   markup=kwargs.get("markup"), highlight=False)


def console(*, stderr: bool = False, quiet: bool = False) -> Console:
    """The rich Console every command prints with (stdout, or stderr with ``stderr=True``).

    On a terminal, rich's own: tables fit the window. In a pipe or a log (``pctk results list
    | less``, ``make demo > log``): plain tables at their full width, so ids and node names
    are never cut or wrapped one character a line, and no colour codes. Log lines never end
    in the source file and line that printed them.
    """
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, quiet=quiet, log_path=False)
    return _PipeConsole(stderr=stderr, quiet=quiet, log_path=False, width=PIPE_WIDTH,
                        soft_wrap=False)
