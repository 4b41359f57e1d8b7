"""The one switch of the node side's test fault points (benchmarks/faultpoints.py): unset, no
fault; a misspelt point is an error, never a fault-free run that passes for a fault."""

from __future__ import annotations

import pytest

from benchmarks import faultpoints


def test_points_are_read_from_one_variable_and_unknown_ones_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(faultpoints.FAULT_ENV, raising=False)
    assert faultpoints.points() == {} and faultpoints.number("fsdp-crash-at-step") == 0
    monkeypatch.setenv(faultpoints.FAULT_ENV, "fsdp-crash-at-step=2, inference-hold-s=1.5")
    assert faultpoints.number("fsdp-crash-at-step") == 2
    assert faultpoints.number("inference-hold-s") == 1.5
    assert faultpoints.number("fsdp-hold-after-step") == 0
    for bad in ("fsdp-crash-at=2", "fsdp-crash-at-step", "PCTK_FSDP_CRASH_AT_STEP=2"):
        monkeypatch.setenv(faultpoints.FAULT_ENV, bad)
        with pytest.raises(ValueError, match="is not a fault point"):
            faultpoints.points()
    assert faultpoints.setting(fsdp_hold_after_step=7) == \
        "PCTK_FAULT_POINTS=fsdp-hold-after-step=7"
    with pytest.raises(ValueError):
        faultpoints.setting(fsdp_hold=7)


def test_a_text_point_keeps_its_value(monkeypatch) -> None:
    monkeypatch.setenv(faultpoints.FAULT_ENV, "fsdp-world-backend-only-on=cuda")
    assert faultpoints.text("fsdp-world-backend-only-on") == "cuda"
    monkeypatch.delenv(faultpoints.FAULT_ENV)
    assert faultpoints.text("fsdp-world-backend-only-on") is None
