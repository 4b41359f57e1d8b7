"""The device script's post-training steps: asked for by name, they run end to end (tiny
shape, CPU) and the summary sets packed SFT against pre-training and prints the RL split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import gpu_check


def test_post_training_steps_only_when_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_check.main(["--dry-run", "--gpus", "1"]) == 0
    assert "--workload" not in capsys.readouterr().out
    assert gpu_check.main(["--dry-run", "--gpus", "1", "--steps", "fsdp,sft,rl"]) == 0
    out = capsys.readouterr().out
    sft = next(x for x in out.splitlines() if x.startswith("[sft,"))
    # the fsdp run's settings: the same GPU defaults choose the same sequence length
    assert "--model 1b --steps 15 --timing-warmup 5 --log-every 5 --workload sft" in sft
    assert "--workload rl" in next(x for x in out.splitlines() if x.startswith("[rl,"))


def test_post_training_steps_run_on_a_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("OUT", raising=False)
    rc = gpu_check.main(["--steps", "fsdp,sft,rl", "--model", "tiny", "--fsdp-steps", "3",
                         "--fsdp-warmup", "1", "--out-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["step"] for s in summary["steps"]] == ["fsdp", "sft", "rl"]
    assert "sft/pretrain MFU: not measured" in out  # a CPU has no peak
    assert "% one sample per row" in out
    split = next(x for x in out.splitlines() if x.startswith("rl phase split: "))
    assert all(p in split for p in ("generation", "reward", "training", "weight_sync"))
    assert "bound by " in split
    assert str(tmp_path / "rl.json") in summary["records"]
