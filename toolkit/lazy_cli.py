"""Command groups that import a command only when it runs or shows its own help: the root
``pctk`` group (toolkit/cli.py) and ``pctk bench`` (toolkit/bench/cli.py) list their commands
as :class:`LazyCommand` rows; the one-line help of each lives in its row.

Its own module, below both groups, so that neither imports the other to get the machinery
(tests/test_layers.py follows a row's ``"module:attribute"`` as an import).
"""

from __future__ import annotations

import importlib
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
    return typer.main.get_group(holder).commands[spec.name]


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
