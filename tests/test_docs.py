"""The documentation's examples run: every command block marked ``<!-- example -->`` in
README.md and docs/*.md is run with the real ``pctk`` console script, and must exit 0 and
print the first output line the block shows.

A marked block is an HTML comment line ``<!-- example -->`` directly above a fenced
```` ```console ```` block; each of its lines that starts with ``$ pctk`` is a command, the
lines under it (up to the next command) the output the page shows, of which ``...`` lines
stand for output left out. Commands are split with shlex (no shell) and run from the
repository root, so relative paths in them (``cluster-configs/p5-training.yaml``, a log under
``tests/nccl/fixtures/``) resolve as a reader in a checkout types them, with ``PCTK_HOME`` in a
temporary folder and no other ``PCTK_*`` variable. So a marked example must need no twin, no
Slurm and no network, print the same thing on every run, and write nothing into the working
tree (no ``-o``/``--emit-config`` into it, ``--no-store`` or nothing to store). Commands that
need a twin or a GPU stay in unmarked blocks.

Why: the README shows a few lines of real output per question and the pages copy output
verbatim; this keeps those lines true as the commands change, and a removed marker fails the
count below. The README is also held to its length: the reference belongs in docs/.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PCTK = Path(sys.executable).parent / "pctk"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = "<!-- example -->"
ELIDED = "..."
# the README and the pages mark at least this many: fewer means markers were lost
MIN_EXAMPLES = 4
README_MAX_LINES = 250


@dataclass(frozen=True)
class Example:
    page: str  # relative to the repository
    line: int  # of the command, 1-based
    command: str  # without the leading "$ "
    first_output: str | None  # the first output line the block shows, if any

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def examples_in(path: Path) -> list[Example]:
    """The commands of every marked console block of one page."""
    lines = path.read_text().splitlines()
    rel = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name
    found: list[Example] = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        assert i + 1 < len(lines) and lines[i + 1].strip() == "```console", (
            f"{rel}:{i + 1}: {MARKER} must stand directly above a ```console block")
        end = next((k for k in range(i + 2, len(lines)) if lines[k].startswith("```")), None)
        assert end is not None, f"{rel}:{i + 2}: the console block is not closed"
        body = list(enumerate(lines[i + 2:end], start=i + 3))
        commands = [k for k, (_, text) in enumerate(body) if text.startswith("$ ")]
        assert commands and commands[0] == 0, f"{rel}:{i + 3}: the block must start with $ pctk"
        for n, k in enumerate(commands):
            number, text = body[k]
            command = text[2:].strip()
            assert command.startswith("pctk "), f"{rel}:{number}: not a pctk command: {text}"
            assert not command.endswith("\\"), f"{rel}:{number}: write the command on one line"
            stop = commands[n + 1] if n + 1 < len(commands) else len(body)
            shown = [t.rstrip() for _, t in body[k + 1:stop]
                     if t.strip() and t.strip() != ELIDED]
            found.append(Example(rel, number, command, shown[0] if shown else None))
    return found


EXAMPLES = [e for page in PAGES for e in examples_in(page)]


def test_the_docs_mark_enough_examples() -> None:
    assert len(EXAMPLES) >= MIN_EXAMPLES, [e.id for e in EXAMPLES]
    assert any(e.page == "README.md" for e in EXAMPLES)
    assert all(e.first_output for e in EXAMPLES), [e.id for e in EXAMPLES if not e.first_output]


def test_the_parser_reads_marked_blocks_only(tmp_path: Path) -> None:
    """A marked block with elided output and two commands, then an unmarked block."""
    page = tmp_path / "page.md"
    page.write_text(f"{MARKER}\n```console\n$ pctk config show p5\n{ELIDED}\n  first line  \n"
                    "more\n$ pctk --version\n```\n\n```console\n$ pctk jobs\nnone\n```\n")
    got = examples_in(page)
    assert [(e.command, e.first_output) for e in got] == [
        ("pctk config show p5", "  first line"), ("pctk --version", None)]


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example_runs_and_prints_what_the_page_shows(example: Example, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PCTK_")}
    env["PCTK_HOME"] = str(tmp_path / "pctk-home")
    argv = shlex.split(example.command)
    result = subprocess.run([str(PCTK), *argv[1:]], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    output = [line.rstrip() for line in (result.stdout + result.stderr).splitlines()]
    assert result.returncode == 0, (example.id, result.returncode, result.stderr[-2000:])
    assert example.first_output in output, (
        f"{example.id}: `{example.command}` no longer prints {example.first_output!r}; "
        f"its output begins: {output[:5]}")


def test_the_readme_stays_short() -> None:
    """The README introduces; the reference lives in docs/ (CONTRIBUTING.md)."""
    assert len((REPO / "README.md").read_text().splitlines()) <= README_MAX_LINES


def test_no_marked_example_needs_a_twin() -> None:
    """What needs Slurm or a twin cannot run here; such blocks stay unmarked."""
    twin_nouns = re.compile(r"^pctk (local|submit|jobs|logs|cancel|demo|observe up)\b|"
                            r"^pctk (bench|health) (?!nccl parse)")
    assert not [e.id for e in EXAMPLES if twin_nouns.search(e.command)]
