"""The ``pctk`` command: ``pctk <noun> <verb>``.

Exit codes: 0 ok, 1 a check failed or found problems, 2 unusable input or environment
(``pctk health run``: 3, Nagios UNKNOWN). Every usage error is one line on stderr.

Subcommands load lazily: ``pctk --help`` and ``pctk --version`` import no subcommand module
(importing them all costs about 0.6 CPU-seconds), and ``pctk config check`` imports only
``toolkit.config.cli`` (tests/perf/cli_startup.py times the start-up). The one-line help
shown in the command list lives in :data:`COMMANDS`; a test keeps it equal to each
command's own help.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any


def _interrupted_while_loading(signum: int, frame: object) -> None:
    """Ctrl-C while the command line is still being loaded (main() not yet running): nothing
    has started, so say so in one line instead of an import traceback."""
    os.write(2, b"pctk: interrupted\n")
    os._exit(130)


# only while this module loads (about 50 ms: typer, click, rich); the previous handler comes
# back after, so a program or notebook that imports toolkit.cli keeps its own
_LOADING = threading.current_thread() is threading.main_thread()
_previous_sigint = (signal.signal(signal.SIGINT, _interrupted_while_loading) if _LOADING
                    else None)
try:
    import typer
    import typer.core
    import typer.main

    from toolkit import __version__
    from toolkit.errors import PctkError, Terminated, visible
    from toolkit.lazy_cli import LazyCommand, first_paragraph, lazy_group, load_command
finally:
    if _LOADING:
        signal.signal(signal.SIGINT, _previous_sigint)

__all__ = ["COMMANDS", "LazyCommand", "app", "first_paragraph", "load_command", "main"]

USAGE_EXIT_CODE = 2
# pctk health run answers a monitor in Nagios codes: unusable input is UNKNOWN (3), since
# 2 would claim the cluster is CRITICAL (see toolkit/health/cli.py)
USAGE_EXIT_CODES = {"pctk health run": 3}


COMMANDS = (
    LazyCommand("local", "toolkit.local.cli:app",
                "The local twin: a real Slurm cluster (munge, MariaDB + slurmdbd, slurmctld, one "
                "slurmd per node) on this machine, shaped like a ParallelCluster config."),
    LazyCommand("config", "toolkit.config.cli:app",
                "Generate, check, upgrade, show and compare ParallelCluster v3 configs."),
    LazyCommand("catalog", "toolkit.catalog_cli:app",
                "The instance catalog: look up a type; refresh unknown types from the EC2 API."),
    LazyCommand("submit", "toolkit.submit.cli:register",
                "Submit a command (multi-node aware: srun across nodes) or a Python function.",
                registers=True),
    LazyCommand("jobs", "toolkit.submit.cli:register",
                "Your jobs: id, name, state, nodes, elapsed, exit code, why pending "
                "(sacct + squeue).", registers=True),
    LazyCommand("logs", "toolkit.submit.cli:register",
                "Print a job's output, each file under a ==> name <== header; --task for one "
                "rank.",
                registers=True),
    LazyCommand("cancel", "toolkit.submit.cli:register", "Cancel jobs (scancel).",
                registers=True),
    LazyCommand("bench", "toolkit.bench.cli:app",
                "Benchmarks of every layer: interconnect, storage, training (FSDP, scaling, "
                "SFT, RL) and inference."),
    LazyCommand("health", "toolkit.health.cli:app",
                "Node health: GPUs, EFA, storage, munge, clock; drain and resume."),
    LazyCommand("results", "toolkit.results.cli:app",
                "Stored benchmark and health results: list, compare, export."),
    LazyCommand("observe", "toolkit.observe.cli:app",
                "Observability: Slurm and cost metrics for Prometheus, the twin's own Prometheus "
                "and node_exporter, alert rules and a Grafana dashboard."),
    LazyCommand("plan", "toolkit.plan.cli:plan_command",
                "Plan a training run: FLOPs, GPU-hours, nodes, days, dollars, memory per GPU, "
                "checkpoint interval; optionally write its ParallelCluster config."),
    LazyCommand("diagnose", "toolkit.results.cli:diagnose_command",
                "Which layer bounds an FSDP run or a scaling study's largest size (compute, "
                "interconnect, straggler, storage, overhead)."),
    LazyCommand("report", "toolkit.results.cli:report_command",
                "Write one self-contained HTML report: busbw, training, health, cluster summary."),
    LazyCommand("demo", "toolkit.demo:demo_command",
                "Start the twin, check node health, sweep collectives, train FSDP, store and "
                "report."),
)


_BY_NAME = {c.name: c for c in COMMANDS}


def _interrupted() -> int:
    """Ctrl-C that no command handled (while starting, or between its steps): one line, with
    the jobs this process submitted that keep running."""
    try:
        from toolkit import slurm
        from toolkit.submit.longrun import still_queued, stopped_message

        line = (stopped_message(still_queued(list(slurm.SUBMITTED))) if slurm.SUBMITTED
                else "pctk: interrupted")
    except (KeyboardInterrupt, Exception):  # a second Ctrl-C while squeue answers
        line = "pctk: interrupted"
    print(line, file=sys.stderr)
    return 130


class _Root(lazy_group(COMMANDS)):  # type: ignore[misc]
    """A Ctrl-C that the command did not handle, while the arguments are read or the command
    runs: typer >= 0.16 would turn it into a silent exit 130; say it, and name the jobs that
    keep running."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            raise typer.Exit(_interrupted()) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise typer.Exit(_interrupted()) from None


# one help style: the root's help in the same boxed format as every command's (typer's rich
# formatter costs about 0.1 s of imports, on `pctk --help` alone)
app = typer.Typer(
    name="pctk",
    cls=_Root,
    help=(
        "Stand up, use and trust Slurm clusters on AWS ParallelCluster: generate and check "
        "cluster configs, submit jobs, benchmark the interconnect and training, check node "
        "health - and try all of it first on a local Slurm twin."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pctk {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """pctk: the Slurm-on-ParallelCluster toolkit."""


def click_exception_types() -> tuple[type[BaseException], ...]:
    """The ``ClickException`` classes a usage error can be an instance of.

    typer parses with its own copy of click since 0.2x (``typer._click``) and with the click
    package before; ``typer.BadParameter`` is a usage error of whichever copy it uses. A
    separately imported click package is caught too, for code that raises its errors.
    """
    found = [c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"]
    click = sys.modules.get("click")
    if click is not None:
        found.append(click.ClickException)
    return tuple(found)


def record_error_type() -> tuple[type[BaseException], ...]:
    """``benchmarks.record.RecordError`` where a command loaded it (a record refused at the
    store's door: unusable input like a PctkError); nothing is imported for it."""
    module = sys.modules.get("benchmarks.record")
    return (module.RecordError,) if module is not None else ()


def report_usage_error(exc: Any) -> int:
    """Print a click error as one line pointing at the command's help; return the exit code."""
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "pctk"
    if type(exc).__name__ == "NoArgsIsHelpError":
        # a bare group: its help, which typer's rich formatter has already printed
        help_text = exc.format_message()
        if help_text.strip():
            print(help_text, file=sys.stderr)
    else:
        message = " ".join(exc.format_message().split())
        print(f"pctk: error: {visible(message)} (see '{path} --help')", file=sys.stderr)
    return USAGE_EXIT_CODES.get(path, USAGE_EXIT_CODE)


def _system_exit_code(code: object) -> int:
    """What the interpreter would exit with for ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Console entry point: return the exit code; user-fixable errors are one line on stderr."""
    try:
        # without standalone mode click returns typer.Exit's code instead of raising it
        rc = app(args=argv, prog_name="pctk", standalone_mode=False)
    except PctkError as exc:
        print(f"pctk: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except (typer.Abort, KeyboardInterrupt):
        return _interrupted()
    except Terminated as exc:
        with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
            print(f"pctk: stopped by {exc}", file=sys.stderr)
        return 128 + exc.signum
    except SystemExit as exc:  # a command's sys.exit(n): main() returns, callers go on
        return _system_exit_code(exc.code)
    except Exception as exc:
        if isinstance(exc, click_exception_types()):
            return report_usage_error(exc)
        if isinstance(exc, record_error_type()):  # a record no reader can use
            print(f"pctk: error: {PctkError(str(exc)).one_line()}", file=sys.stderr)
            return PctkError.exit_code
        raise
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
