"""Command groups that import a command only when it runs or shows its own help: the root
``pctk`` group (toolkit/cli.py) and ``pctk bench`` (toolkit/bench/cli.py) list their commands
as :class:`LazyCommand` rows; the one-line help of each lives in its row.

Its own module, below both groups, so that neither imports the other to get the machinery
(tests/test_layers.py follows a row's ``"module:attribute"`` as an import).
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
import typer.core
import typer.main


@dataclass(frozen=True)
class LazyCommand:
    """A top-level command imported only when it runs or shows its own help.

    ``target`` is ``module:attribute``: a ``typer.Typer`` sub-app, a command function, or,
    with ``registers``, a function that registers this command (and siblings) on an app.
    """

    name: str
    target: str
    help: str
    registers: bool = False


def load_command(spec: LazyCommand) -> Any:
    """Import ``spec.target`` and build its click command exactly as ``add_typer`` would."""
    module_name, attribute = spec.target.split(":")
    target = getattr(importlib.import_module(module_name), attribute)
    holder = typer.Typer()
    if spec.registers:
        target(holder)
    elif isinstance(target, typer.Typer):
        holder.add_typer(target, name=spec.name)
    else:
        holder.command(spec.name)(target)
    command = typer.main.get_group(holder).commands[spec.name]
    unwrap_help(command)
    return command


# a line that starts one of these keeps the break before it: a list item, an example
KEEP_BREAK = re.compile(r"^(\s|[-*\u2022] |--|\d+[.)] |\$ |pctk )")


def unwrap_text(text: str) -> str:
    """A docstring's paragraphs with their single line breaks joined, so that the help
    formatter fills each paragraph to the terminal's width. typer's rich formatter keeps a
    paragraph's line breaks and wraps each line again, which leaves a line of one or two words
    wherever the source line was longer than the terminal. Kept: a paragraph that starts with
    ``\\b`` (click's no-rewrap mark), a break before a list item or an example, and anything
    after ``\\f``."""
    text = inspect.cleandoc(text)
    body, cut, tail = text.partition("\f")
    paragraphs = []
    for para in body.split("\n\n"):
        if para.startswith("\b"):
            paragraphs.append(para)
            continue
        lines = para.split("\n")
        joined = [lines[0]]
        for line in lines[1:]:
            if KEEP_BREAK.match(line):
                joined.append(line)
            else:
                joined[-1] = f"{joined[-1].rstrip()} {line.strip()}"
        paragraphs.append("\n".join(joined))
    return "\n\n".join(paragraphs) + cut + tail


def unwrap_help(command: Any) -> None:
    """:func:`unwrap_text` on the help of ``command`` and of every subcommand it holds."""
    if command.help:
        command.help = unwrap_text(command.help)
    for sub in getattr(command, "commands", {}).values():
        unwrap_help(sub)


class LazyGroup(typer.core.TyperGroup):
    """A group that lists every command of :attr:`lazy` and imports one only when used
    (the root group and ``pctk bench`` use it)."""

    lazy: ClassVar[dict[str, LazyCommand]] = {}
    _listing = False  # True while help lists the commands: short help needs no import

    def list_commands(self, ctx: Any) -> list[str]:
        eager = [n for n in super().list_commands(ctx) if n not in self.lazy]
        return [*self.lazy, *eager]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        spec = self.lazy.get(cmd_name)
        if spec is None or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        if self._listing:
            return typer.core.TyperCommand(name=cmd_name, help=spec.help)
        self.commands[cmd_name] = load_command(spec)
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command with its whole first paragraph, wrapped (click would cut it at '...')."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, first_paragraph(cmd.help or "")))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def lazy_group(commands: tuple[LazyCommand, ...]) -> type[LazyGroup]:
    """A :class:`LazyGroup` class for these commands."""
    return type("LazyGroup", (LazyGroup,), {"lazy": {c.name: c for c in commands}})
