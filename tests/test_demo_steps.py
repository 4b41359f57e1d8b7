"""A demo step whose command FAILs its verdict: exit 1 comes back to the demo, which goes on.

``pctk bench collectives`` ends a FAIL verdict with ``SystemExit(1)``; before main() caught it,
that exception ended ``pctk demo`` at step 3 although the step accepts exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from benchmarks.record import new_record, write_record
from toolkit.cli import main
from toolkit.demo import run_step
from toolkit.errors import PctkError


def _failing_collectives_record(path: Path) -> Path:
    """A real collectives record with one wrong element: its verdict is FAIL."""
    row = {"size_bytes": 1024, "count": 256, "dtype": "float", "redop": "sum", "root": -1,
           "out_of_place": None,
           "in_place": {"time_us": 10.0, "algbw_gbps": 0.1024, "busbw_gbps": 0.1024,
                        "wrong": 1, "error": None}}
    block = {"collective": "all_reduce", "nranks": 2, "format": "torch", "complete": True,
             "rows": [row]}
    write_record(path, new_record("collectives", metrics={"collectives": [block]}))
    return path


def test_failed_verdict_is_an_exit_code_not_an_exception(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = _failing_collectives_record(tmp_path / "rec.json")
    assert main(["bench", "collectives", "--from-record", str(rec), "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    assert verdict["status"] == "FAIL"


def test_demo_step_accepting_exit_1_goes_on_after_a_fail(tmp_path: Path) -> None:
    rec = _failing_collectives_record(tmp_path / "rec.json")
    argv = ["bench", "collectives", "--from-record", str(rec)]
    console = Console(file=(tmp_path / "demo.out").open("w"))
    assert run_step(console, "3. collectives", argv, ok=(0, 1)) == 1
    with pytest.raises(PctkError, match=r"demo step '3. collectives' failed \(exit 1\)"):
        run_step(console, "3. collectives", argv)
