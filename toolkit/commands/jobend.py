"""The end of a benchmark command that runs one Slurm job and reads one record (``pctk bench
fsdp``, ``pctk bench inference``): not waiting says where the record will be; a finished run
is stored (the command's step: results sit above benchmarks), printed or emitted as JSON, and
fails the command when its verdict failed."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import typer
from rich.table import Table

from toolkit.cliout import console as cli_console
from toolkit.cliout import emit_json, fail_if
from toolkit.results.ingest import store_finished_run
from toolkit.results.nextstep import next_step
from toolkit.twinnote import twin_caveat


class _Job(Protocol):
    @property
    def run_dir(self) -> Path: ...

    @property
    def record_path(self) -> Path: ...


class _Done(Protocol):
    @property
    def job_id(self) -> str: ...

    @property
    def record(self) -> dict[str, Any] | None: ...

    @property
    def log(self) -> Path: ...

    @property
    def failed(self) -> bool: ...


def finish(job: _Job, done: _Done, *, title: str,
           rows: Callable[[dict[str, Any]], Iterable[tuple[str, str]]], as_json: bool,
           store: bool, db: Path | None) -> None:
    if done.record is None:
        if as_json:
            emit_json({"job_id": done.job_id, "run_dir": str(job.run_dir)}, indent=None,
                      sort_keys=False)
        else:
            typer.echo(f"submitted job {done.job_id}; record will be {job.record_path} (not "
                       f"waiting, so store it yourself: pctk results add {job.record_path})")
        return
    if store:
        store_finished_run(job.record_path, db)
    if as_json:
        emit_json(done.record)
    else:
        print_summary(done.record, title, rows)
        typer.echo(f"record: {job.record_path}\nlog: {done.log}\n{next_step(done.record)}")
    fail_if(done.failed)


def print_summary(rec: dict[str, Any], title: str,
                  rows: Callable[[dict[str, Any]], Iterable[tuple[str, str]]]) -> None:
    table = Table(title=title, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows(rec):
        table.add_row(key, value)
    if caveat := twin_caveat(rec):
        table.add_row("twin", caveat)
    cli_console().print(table)
