"""submitit's private members that pctk overrides or calls: the installed submitit has each in
the shape pctk expects, and a release that changes one stops pctk with one line naming the
release and the member (toolkit/submit/submitit_private.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import submitit
from submitit.core import core as submitit_core
from submitit.slurm import slurm as submitit_slurm

from toolkit.errors import PctkError
from toolkit.submit import submitit_private
from toolkit.submit.submitit_private import TESTED_WITH, check_submitit, problems

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_submitit_is_the_one_pinned_and_checked() -> None:
    assert problems() == []
    assert submitit.__version__ == TESTED_WITH
    pins = [f"submitit=={TESTED_WITH}"]
    assert re.search(rf'^\s*"{re.escape(pins[0])}",', (REPO / "pyproject.toml").read_text(),
                     re.MULTILINE)
    assert f"{pins[0]}\n" in (REPO / "constraints.txt").read_text()


def test_every_private_member_the_subclasses_override_is_checked() -> None:
    from toolkit.submit.executor import ClusterExecutor
    from toolkit.submit.watcher import PctkSlurmJob, PctkWatcher

    checked = set(submitit_private.EXPECTED)
    for cls, base in ((ClusterExecutor, "SlurmExecutor"), (PctkWatcher, "SlurmInfoWatcher"),
                      (PctkSlurmJob, "SlurmJob")):
        parent = getattr(submitit_slurm, base)
        overridden = {name for name in vars(cls) if hasattr(parent, name)
                      and name.startswith("_") and not name.startswith(("__", "_abc"))}
        assert overridden, cls.__name__
        assert {f"{base}.{name}" for name in overridden} <= checked, cls.__name__


def _one_line(exc: pytest.ExceptionInfo[PctkError]) -> str:
    line = exc.value.one_line()
    assert "\n" not in line
    assert line.startswith(f"submitit {submitit.__version__} differs from the {TESTED_WITH}")
    return line


def test_a_changed_signature_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def renamed(self: object, path: Path) -> list[str]:
        return []

    monkeypatch.setattr(submitit_slurm.SlurmExecutor, "_make_submission_command", renamed)
    with pytest.raises(PctkError) as exc:
        check_submitit()
    assert ("SlurmExecutor._make_submission_command is (self, path), pctk expects "
            "(self, submission_file_path)") in _one_line(exc)


def test_a_missing_member_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(submitit_slurm, "_make_sbatch_string")
    monkeypatch.delattr(submitit_core.PicklingExecutor, "_throttle")  # SlurmExecutor inherits it
    with pytest.raises(PctkError) as exc:
        check_submitit()
    line = _one_line(exc)
    assert "_make_sbatch_string is missing" in line and "SlurmExecutor._throttle is missing" in line


def test_a_static_method_turned_instance_method_and_a_dropped_attribute_are_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def job_id(self: object, string: str) -> str:
        return string

    monkeypatch.setattr(submitit_slurm.SlurmExecutor, "_get_job_id_from_submission_command",
                        job_id)
    original = submitit_slurm.SlurmInfoWatcher.__init__

    def init(self: submitit_slurm.SlurmInfoWatcher, delay_s: int = 60) -> None:
        original(self, delay_s)
        del self._num_calls

    monkeypatch.setattr(submitit_slurm.SlurmInfoWatcher, "__init__", init)
    with pytest.raises(PctkError) as exc:
        check_submitit()
    line = _one_line(exc)
    assert ("SlurmExecutor._get_job_id_from_submission_command is (self, string), pctk "
            "expects staticmethod (string)") in line
    assert "SlurmInfoWatcher instance is attributes _finished, _info_dict, " \
        "_last_status_check, _output, _registered" in line


def test_the_cli_stops_with_one_line_before_anything_is_submitted(tmp_path: Path) -> None:
    code = ("import sys; from submitit.slurm import slurm; "
            "slurm.SlurmExecutor._submit_command = lambda self, cmd, extra: None; "
            "from toolkit.cli import main; sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "submit", "--help"], capture_output=True,
                       text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"pctk: error: submitit {submitit.__version__} differs")
    assert "SlurmExecutor._submit_command is (self, cmd, extra)" in line
    assert f"fix: pip install submitit=={TESTED_WITH}" in line
