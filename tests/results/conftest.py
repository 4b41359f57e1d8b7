from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from toolkit.cli import main

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PCTK_RESULTS_DB", raising=False)
    monkeypatch.setenv("PCTK_HOME", str(tmp_path / "home"))
    return tmp_path / "results.db"


@pytest.fixture
def pctk(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run the pctk CLI in-process: returns (exit code, stdout, stderr)."""

    def run(*argv: str | Path) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run
