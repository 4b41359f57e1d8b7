"""Options every long-running pctk command spells the same way.

``-o/--out`` names an output file, ``--run-dir`` a run folder, ``--no-store`` skips storing
the result record in the results database. Older spellings stay as hidden aliases that say
they are deprecated, so scripts keep working.
"""

from __future__ import annotations

from typing import TypeVar

import typer

from toolkit.errors import PctkError

T = TypeVar("T")

STORE_HELP = ("Store the result record in the results database as the run finishes "
              "(default; --no-store to skip).")
DB_HELP = "Results database file (default: <state home>/results.db)."


StoreOption = typer.Option(True, "--store/--no-store", help=STORE_HELP)
DbOption = typer.Option(None, "--db", envvar="PCTK_RESULTS_DB", help=DB_HELP)


def pick_alias(new: T | None, old: T | None, new_flag: str, old_flag: str) -> T | None:
    """The value of ``new_flag``, or of its deprecated alias ``old_flag`` (with a warning)."""
    if old is None:
        return new
    if new is not None:
        raise PctkError(f"{new_flag} and {old_flag} both given", f"give {new_flag} only")
    typer.echo(f"pctk: warning: {old_flag} is deprecated here; use {new_flag}", err=True)
    return old
