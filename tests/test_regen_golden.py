"""tests/regen_golden.py, the one way golden files are rewritten (the tests only compare): it
finds every generated file current, and names one that is not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "regen_golden.py"


def test_check_finds_every_generated_file_current() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_no_test_rewrites_a_golden_file() -> None:
    for path in REPO.joinpath("tests").rglob("test_*.py"):
        text = path.read_text()
        assert "PCTK_UPDATE_GOLDEN" not in text or path.name == "test_regen_golden.py", path
