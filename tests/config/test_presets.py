"""Presets: reproducible from their specs, valid under the official schema and our lints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from toolkit.config.check import check_file, check_text
from toolkit.config.findings import Level
from toolkit.config.model import load_topology
from toolkit.config.presets import render_preset, spec_paths
from toolkit.paths import presets_dir

REPO = Path(__file__).resolve().parents[2]
SPECS = spec_paths()
EXPECTED = {"p5-training", "p4de-training", "p5en-training", "p6-b200-training",
            "trn1-training", "g5-dev"}


def test_every_expected_preset_has_a_spec() -> None:
    assert {p.stem for p in SPECS} >= EXPECTED


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_preset_is_byte_for_byte_its_spec_rendering(spec: Path) -> None:
    committed = (presets_dir() / spec.name).read_text(encoding="utf-8")
    assert render_preset(spec) == committed, "run `pctk config regen`"


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_preset_passes_schema_and_lints(spec: Path) -> None:
    report = check_file(presets_dir() / spec.name, environ={})
    assert report.usable
    assert [f for f in report.findings if f.level is Level.ERROR] == []


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_load_dump_load_is_stable(spec: Path) -> None:
    first = yaml.safe_load((presets_dir() / spec.name).read_text())
    dumped = yaml.safe_dump(first, sort_keys=False)
    assert yaml.safe_load(dumped) == first
    assert check_text(dumped, "dumped.yaml", environ={}).exit_code == 0


@pytest.mark.parametrize("seed", ["1", "2"])
def test_rendering_is_the_committed_preset_whatever_the_hash_seed(seed: str) -> None:
    # a fresh interpreter per seed: set and dict-of-set orders differ between them, and
    # every spec must still render to the committed preset, byte for byte
    code = ("import json, sys; from toolkit.config.presets import render_preset, spec_paths; "
            "json.dump({p.name: render_preset(p) for p in spec_paths()}, sys.stdout)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=REPO, env={**os.environ, "PYTHONHASHSEED": seed})
    assert r.returncode == 0, r.stderr
    rendered = json.loads(r.stdout)
    assert sorted(rendered) == sorted(p.name for p in SPECS)
    for name, text in rendered.items():
        assert text == (presets_dir() / name).read_text(encoding="utf-8"), name


def test_p5_training_keeps_the_twin_contract() -> None:
    topo = load_topology(presets_dir() / "p5-training.yaml")
    gpu, cpu = topo.queue("gpu"), topo.queue("cpu")
    assert gpu.capacity_type == "CAPACITY_BLOCK"
    (p5,) = gpu.compute_resources
    assert (p5.name, p5.instance_type, p5.min_count, p5.max_count, p5.efa) == (
        "p5", "p5.48xlarge", 4, 4, True)
    (c5,) = cpu.compute_resources
    assert (c5.name, c5.instance_type, c5.min_count, c5.max_count) == ("c5", "c5.4xlarge", 0, 8)
    assert topo.accounting


def test_derived_settings() -> None:
    p4de = yaml.safe_load((presets_dir() / "p4de-training.yaml").read_text())
    gpu = p4de["Scheduling"]["SlurmQueues"][0]
    assert gpu["Networking"]["PlacementGroup"] == {"Enabled": True}
    assert gpu["ComputeResources"][0]["Efa"] == {"Enabled": True}
    assert gpu["JobExclusiveAllocation"] is True
    cpu = p4de["Scheduling"]["SlurmQueues"][1]
    assert "Efa" not in cpu["ComputeResources"][0] and "PlacementGroup" not in cpu["Networking"]
    # targeted reservation: placement group explicitly off
    p5en = yaml.safe_load((presets_dir() / "p5en-training.yaml").read_text())
    assert p5en["Scheduling"]["SlurmQueues"][0]["Networking"]["PlacementGroup"] == {
        "Enabled": False}
    # capacity block: no placement group at all
    p5 = yaml.safe_load((presets_dir() / "p5-training.yaml").read_text())
    assert "PlacementGroup" not in p5["Scheduling"]["SlurmQueues"][0]["Networking"]
    # Trainium: exclusive nodes, but no GPU (DCGM) health check
    trn = yaml.safe_load((presets_dir() / "trn1-training.yaml").read_text())
    assert "HealthChecks" not in trn["Scheduling"]["SlurmQueues"][0]


def test_rendered_comments_say_why() -> None:
    text = (presets_dir() / "p5-training.yaml").read_text()
    assert "# Slurm accounting: sacct and submitit job status need it" in text
    assert "# 32 EFA interfaces" in text
