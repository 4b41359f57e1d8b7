"""The ``pctk`` command: ``pctk <noun> <verb>``.

Exit codes: 0 ok, 1 a check failed or found problems, 2 unusable input or environment.
Heavy imports (torch, matplotlib, the ParallelCluster schema) happen inside commands so that
``pctk --help`` stays fast.
"""

from __future__ import annotations

import sys

import typer

from toolkit import __version__
from toolkit.bench.cli import app as bench_app
from toolkit.config.cli import app as config_app
from toolkit.demo import demo_command
from toolkit.errors import PctkError
from toolkit.health.cli import app as health_app
from toolkit.local.cli import app as local_app
from toolkit.results.cli import app as results_app
from toolkit.results.cli import report_command
from toolkit.submit.cli import register as register_submit

app = typer.Typer(
    name="pctk",
    help=(
        "Stand up, use and trust Slurm clusters on AWS ParallelCluster: generate and check "
        "cluster configs, submit jobs, benchmark the interconnect and training, check node "
        "health - and try all of it first on a local Slurm twin."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(local_app, name="local")
app.add_typer(bench_app, name="bench")
register_submit(app)
app.add_typer(config_app, name="config")
app.add_typer(results_app, name="results")
app.add_typer(health_app, name="health")
app.command("report")(report_command)
app.command("demo")(demo_command)


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


def main(argv: list[str] | None = None) -> int:
    """Console entry point: turn user-fixable errors into one line and exit code 2."""
    try:
        # without standalone mode click returns typer.Exit's code instead of raising it
        rc = app(args=argv, prog_name="pctk", standalone_mode=False)
    except PctkError as exc:
        print(f"pctk: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        print("pctk: aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("pctk: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # click usage errors arrive here in standalone_mode=False
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return exc.exit_code
        raise
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
