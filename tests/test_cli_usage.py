"""Usage errors through the installed ``pctk`` console script: one line, exit 2, no traceback.

The script is the one next to the interpreter running the tests (``.venv/bin/pctk``), so the
typer and click versions under test are the ones a user of this environment gets.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.nccl import FIXTURES
from toolkit.bench.cli import BENCH_COMMANDS
from toolkit.cli import COMMANDS, first_paragraph, load_command, main
from toolkit.lazy_cli import KEEP_BREAK

PCTK = Path(sys.executable).parent / "pctk"

# (argv, exit code): 2 for unusable input; pctk health run answers in Nagios codes (3 UNKNOWN)
BAD_INVOCATIONS = [
    (["foo"], 2),                                   # unknown command
    (["--bogus"], 2),                               # unknown root option
    (["config", "chek", "x.yaml"], 2),              # misspelt subcommand
    (["config", "show"], 2),                        # missing argument
    (["config", "show", "--bogus", "x.yaml"], 2),   # unknown option of a subcommand
    (["config", "new"], 2),                         # missing required option
    (["config", "new", "--spec"], 2),               # option without its value
    (["logs"], 2),                                  # missing job id
    (["jobs", "extra"], 2),                         # unexpected argument
    (["submit", "--nodes", "two", "--", "hostname"], 2),  # not an int
    (["submit", "--nodes", "0", "--", "hostname"], 2),    # out of range
    (["local", "up", "--bogus"], 2),
    (["bench", "nccl", "prase", "x.log"], 2),
    (["bench", "collectives", "--nodes", "x"], 2),
    (["bench", "collectives", "--nodes", "0"], 2),
    (["results", "list", "--limit", "0"], 2),
    (["report", "--bogus"], 2),
    (["demo", "--nodes", "0"], 2),
    (["health", "--bogus"], 2),                     # the group, not the Nagios check
    (["health", "run", "--bogus"], 3),
    (["health", "run", "--dcgm-level", "7"], 3),
    (["health", "run", "extra"], 3),
]


def _pctk(*argv: str) -> subprocess.CompletedProcess[str]:
    assert PCTK.is_file(), f"no console script at {PCTK}: install pctk (make venv)"
    return subprocess.run([str(PCTK), *argv], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("argv", "code"), BAD_INVOCATIONS,
                         ids=[" ".join(argv) for argv, _ in BAD_INVOCATIONS])
def test_usage_error_is_one_line_and_an_exit_code(argv: list[str], code: int) -> None:
    res = _pctk(*argv)
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    assert res.returncode == code, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pctk: error: "), res.stderr
    assert "--help" in lines[0] and res.stdout == ""


def test_misspelt_command_gets_a_suggestion() -> None:
    assert "Did you mean 'check'?" in _pctk("config", "chek", "x.yaml").stderr


def test_bare_group_prints_its_help_and_exit_2() -> None:
    res = _pctk("config")
    assert res.returncode == 2 and "Traceback" not in res.stderr + res.stdout
    assert "check" in res.stdout + res.stderr


def test_help_lists_every_command_without_importing_any() -> None:
    code = ("import sys; from toolkit.cli import main; main(['--help']); "
            "print(sorted(m for m in sys.modules if m.startswith('toolkit.')))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    help_text, loaded = res.stdout.rstrip().rsplit("\n", 1)
    # the root group, its lazy-command machinery and the error type: no command module
    assert loaded == "['toolkit.cli', 'toolkit.errors', 'toolkit.lazy_cli']"
    flat = " ".join(help_text.replace("│", " ").split())  # the boxed panel's borders
    for spec in COMMANDS:
        assert f"{spec.name} {spec.help}" in flat, spec.name


@pytest.mark.parametrize("spec", COMMANDS, ids=lambda s: s.name)
def test_listed_help_is_the_commands_own(spec, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert first_paragraph(load_command(spec).help or "") == spec.help
    assert main([spec.name, "--help"]) == 0
    assert f"pctk {spec.name}" in capsys.readouterr().out


@pytest.mark.parametrize("spec", BENCH_COMMANDS, ids=lambda s: s.name)
def test_listed_bench_help_is_the_commands_own(spec, capsys: pytest.CaptureFixture[str]  # type: ignore[no-untyped-def]
                                               ) -> None:
    assert first_paragraph(load_command(spec).help or "") == spec.help
    assert main(["bench", spec.name, "--help"]) == 0
    assert f"pctk bench {spec.name}" in capsys.readouterr().out


def test_bench_nccl_parse_imports_no_other_benchmark_driver(tmp_path: Path) -> None:
    log = FIXTURES / "09_nccl-tests-287-allreduce-1gpu-5090-avg0.log"
    probe = ("import sys\nfrom toolkit.cli import main\n"
             f"main(['bench', 'nccl', 'parse', {str(log)!r}, '--no-store', '--json'])\n"
             "print(sorted(m for m in sys.modules\n"
             "             if m.startswith(('toolkit.bench.', 'submitit'))\n"
             "             and not m.startswith(('toolkit.bench.nccl', 'toolkit.bench.comm'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60).stdout.strip().splitlines()[-1]
    assert out == "['toolkit.bench.cli']"


def test_version_through_the_console_script() -> None:
    res = _pctk("--version")
    assert res.returncode == 0 and res.stdout.startswith("pctk ")


def _no_slurm_env(home: Path) -> dict[str, str]:
    """No twin, no SLURM_CONF: what a tired user's fresh shell on a laptop looks like."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PCTK_"))}
    return {**env, "PCTK_HOME": str(home)}


@pytest.mark.parametrize(("argv", "code", "start"), [
    (["health", "slow-nodes", "--size", "1Q", "--partition", "cpu"], 2, "--size: "),
    (["health", "slow-nodes", "--size", "0", "--partition", "cpu"], 2, "--size: "),
    (["health", "slow-nodes", "--timeout", "0", "--partition", "cpu"], 2, "--timeout 0 "),
])
def test_bad_values_are_refused_before_slurm_is_asked(tmp_path: Path, argv: list[str],
                                                       code: int, start: str) -> None:
    res = subprocess.run([str(PCTK), *argv], capture_output=True, text=True, timeout=120,
                         env=_no_slurm_env(tmp_path))
    assert res.returncode == code, res.stderr
    assert res.stderr.splitlines() == [res.stderr.strip()]
    assert res.stderr.startswith(f"pctk: error: {start}"), res.stderr


@pytest.mark.skipif(Path("/etc/slurm/slurm.conf").exists(), reason="this machine has a Slurm")
@pytest.mark.parametrize("argv", [["jobs"], ["health", "slow-nodes", "--partition", "cpu"]])
def test_no_slurm_is_one_line_not_slurms_chain_of_errors(tmp_path: Path,
                                                         argv: list[str]) -> None:
    res = subprocess.run([str(PCTK), *argv], capture_output=True, text=True, timeout=120,
                         env=_no_slurm_env(tmp_path))
    assert res.returncode != 0 and "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pctk: error: "), res.stderr
    assert "configuration source" in lines[0] and "fix: " in lines[0]


@pytest.mark.parametrize("verb", [["config", "show"], ["config", "check"], ["local", "up", "-c"]])
def test_a_path_with_control_characters_is_shown_escaped_on_one_line(tmp_path: Path,
                                                                     verb: list[str]) -> None:
    # a folder named with a newline and an escape sequence: the error names it escaped,
    # on one line, instead of breaking the line (or the terminal) where the name does
    folder = tmp_path / "x\nMailProg=evil #\x1b[31m"
    folder.mkdir()
    cfg = folder / "c.yaml"
    cfg.write_text("Scheduling: {Scheduler: slurm, SlurmQueues: []}\n")
    res = subprocess.run([str(PCTK), *verb, str(cfg)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PCTK_HOME": str(tmp_path / "home")})
    assert res.returncode in (0, 1, 2), res
    err = res.stderr if res.stderr.strip() else res.stdout
    if res.returncode == 2:
        assert err.count("\n") == 1 and err.startswith("pctk: error: "), err
        assert "x\\nMailProg=evil #\\x1b[31m" in err, err
    assert "\x1b[31m" not in res.stdout + res.stderr


# Ctrl-C while `pctk` is still loading its command line (typer, click, rich: about 50 ms on a
# busy machine): a finder that sends the process SIGINT the moment typer is imported puts the
# signal there on every run
_SIGINT_ON_TYPER = """
import os, signal, sys
class Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Finder())
sys.argv = ["pctk", "--help"]
from toolkit.cli import main
print("loaded:", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


def test_ctrl_c_while_the_cli_loads_is_one_line_and_130() -> None:
    r = subprocess.run([sys.executable, "-c", _SIGINT_ON_TYPER], capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stderr, r.stdout) == (130, "pctk: interrupted\n", "")


def test_importing_the_cli_leaves_the_callers_sigint_handler() -> None:
    r = subprocess.run([sys.executable, "-c", _SIGINT_ON_TYPER.replace("os.kill(os.getpid(), "
                                                                      "signal.SIGINT)", "pass")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "loaded: True\n", r.stderr


def _command_paths() -> list[list[str]]:
    """Every command and subcommand path of pctk, e.g. ["local", "fault", "slow-net"]."""
    paths: list[list[str]] = []

    def walk(path: list[str], command: Any) -> None:
        paths.append(path)
        subs = dict(getattr(command, "commands", {}))
        for spec in getattr(command, "lazy", {}).values():
            subs.setdefault(spec.name, load_command(spec))
        for name, sub in subs.items():
            if not sub.hidden:
                walk([*path, name], sub)

    for spec in COMMANDS:
        walk([spec.name], load_command(spec))
    return paths


def test_every_help_fills_its_paragraphs_at_80_columns(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A docstring's own line breaks are not kept inside a paragraph: kept, the rich formatter
    wrapped each long source line again and left lines of one or two words ("above the" /
    "bound. Exit 0 ..."). Each line of a description that another line of the same paragraph
    follows is filled to at least 55 of the 80 columns, unless a list item follows it."""
    monkeypatch.setenv("COLUMNS", "80")
    ragged = []
    paths = _command_paths()
    assert len(paths) > 60
    for path in paths:
        assert main([*path, "--help"]) == 0, path
        out = capsys.readouterr().out.splitlines()
        start = next(i for i, line in enumerate(out) if "Usage:" in line) + 1
        desc = []
        for line in out[start:]:
            if line.lstrip().startswith(("╭", "Options:", "Commands:", "Arguments:")):
                break
            desc.append(line.strip())
        for line, after in itertools.pairwise(desc):
            if line and after and len(line) < 55 and not KEEP_BREAK.match(after):
                ragged.append(f"pctk {' '.join(path)}: {line!r} / {after!r}")
    assert not ragged, "\n".join(ragged)
