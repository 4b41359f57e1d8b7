"""`pctk plan` on the command line: field names, inputs echoed with their sources, solve-for
modes, measured figures from stored records, one-line errors with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.record import new_record
from tests.results.records import fsdp_record
from toolkit.cli import main
from toolkit.results.store import ResultStore

REPO = Path(__file__).resolve().parents[2]
FIELDS = ("flops", "gpu_hours", "days", "gpus", "nodes", "cost_usd", "memory", "checkpoint",
          "failures", "inputs")


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["plan", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _pctk(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *argv], capture_output=True,
                          text=True, timeout=120, cwd=REPO)


def test_json_has_the_promised_fields_and_every_input_with_its_source(capsys):
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--nodes", "4")
    assert code == 0
    for name in FIELDS:
        assert name in plan, name
    assert plan["gpus"] == 32 and plan["nodes"] == 4
    for name, row in plan["inputs"].items():
        assert set(row) == {"value", "source"} and row["source"], name
    assert plan["inputs"]["tokens"] == {"value": 1e12, "source": "--tokens"}
    assert plan["inputs"]["mfu"]["source"].startswith("planning default")
    assert plan["inputs"]["instance_type"] == {
        "value": "p5.48xlarge", "source": "default (toolkit/data/instances.yaml)"}
    od, cb = plan["cost_usd"]["on_demand"], plan["cost_usd"]["capacity_block"]
    assert od["usd_per_node_hour"] == 55.04 and od["date"] == "2026-07-20"
    assert "karpenter" in od["source"]
    # the Capacity Block rate on record was valid until 2025-01-01: named, not totalled
    assert cb["usd_per_node_hour"] == 39.33 and "capacityblocks" in cb["source"]
    assert cb["expired"] and cb["valid_until"] == "2025-01-01" and cb["usd"] is None
    hours = plan["gpu_hours_with_overhead"] / 8  # node-hours
    assert od["usd"] == pytest.approx(hours * 55.04)
    # 4 nodes: the job fails 4x as often as one node
    assert plan["failures"]["job_mtbf_hours"] == pytest.approx(
        plan["failures"]["node_mtbf_hours"] / 4)
    ckpt = plan["checkpoint"]
    assert ckpt["interval_hours"] == pytest.approx(
        (2 * ckpt["write_seconds"] / 3600 * plan["failures"]["job_mtbf_hours"]) ** 0.5)
    assert plan["days"] > plan["compute_days"] == pytest.approx(plan["gpu_hours"] / 32 / 24)
    mem = plan["memory"]
    assert mem["fsdp"]["shard_size"] == 32 and mem["hsdp"]["shard_size"] == 8
    assert mem["chosen"]["fits"] is True


def test_the_table_echoes_every_input_with_its_source(capsys):
    assert main(["plan", "--model", "70b", "--tokens", "2T", "--nodes", "8"]) == 0
    text = capsys.readouterr().out
    _, plan = _plan(capsys, "--model", "70b", "--tokens", "2T", "--nodes", "8")
    for name, row in plan["inputs"].items():
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(name + " "))
        assert f"<- {row['source']}" in line, name
    assert "smallest shard that fits" in text and "Young/Daly" in text
    assert "capacity block       n/a: the rate on record" in text
    assert "on-demand            $" in text
    # 70B on 64 H100s fits only with activation checkpointing, and says why it is on
    assert plan["inputs"]["activation_checkpointing"] == {
        "value": True, "source": "auto: on, since the plan does not fit without it"}
    assert plan["memory"]["smallest_shard"] == {"no_ac": None, "ac": 32}


def test_a_plan_that_does_not_fit_exits_1(capsys):
    code, plan = _plan(capsys, "--model", "70b", "--tokens", "2T", "--nodes", "8", "--no-ac")
    assert code == 1 and plan["fits"] is False
    assert plan["memory"]["chosen"] == {"strategy": "fsdp", "shard_size": 64,
                                        "activation_checkpointing": False,
                                        "total_gib": plan["memory"]["fsdp"]["total_gib_no_ac"],
                                        "fits": False}
    # HSDP within one node cannot hold 70B at all: 131 GiB of states per GPU
    code, plan = _plan(capsys, "--model", "70b", "--tokens", "2T", "--nodes", "8",
                       "--strategy", "hsdp")
    assert code == 1 and plan["memory"]["chosen"]["shard_size"] == 8


def test_days_target_gives_the_fewest_nodes_that_meet_it(capsys):
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "15T", "--days", "30")
    assert code == 0
    n = plan["nodes"]
    assert plan["days"] <= 30
    assert plan["inputs"]["nodes"]["source"] == "solved: the fewest nodes that meet --days"
    code, fewer = _plan(capsys, "--model", "8b", "--tokens", "15T", "--nodes", str(n - 1))
    assert fewer["days"] > 30


def test_budget_gives_the_fastest_plan_within_it(capsys):
    code, cheap = _plan(capsys, "--model", "8b", "--tokens", "1T", "--nodes", "1")
    budget = cheap["cost_usd"]["on_demand"]["usd"] * 1.02
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--budget", f"{budget:.2f}")
    assert code == 0
    assert plan["cost_usd"]["on_demand"]["usd"] <= budget
    assert plan["nodes"] > 1 and plan["days"] < cheap["days"]
    code, more = _plan(capsys, "--model", "8b", "--tokens", "1T", "--nodes",
                       str(plan["nodes"] + 1))
    assert more["cost_usd"]["on_demand"]["usd"] > budget


def test_chinchilla_and_flops_give_the_tokens(capsys):
    _, plan = _plan(capsys, "--model", "8b", "--chinchilla")
    assert plan["tokens"] == 20 * 8_030_261_248
    assert "Hoffmann" in plan["inputs"]["tokens"]["source"]
    _, plan = _plan(capsys, "--model", "8b", "--flops", "5.7914449920e22")
    assert plan["tokens"] == pytest.approx(1e12)


def test_measured_mfu_and_checkpoint_rate_come_from_stored_records(capsys, tmp_path):
    fsdp = fsdp_record(mfu=0.34)  # p5.48xlarge, checkpoint saves at 10.1 and 10.8 GB/s
    fsdp["cluster"]["twin"] = False
    fsdp["params"]["model"] = "8b"  # as benchmarks.fsdp.train writes the preset name
    fsdp["params"]["seq_len"] = 8192  # and the sequence length its MFU was measured at
    storage = new_record("storage", metrics={"ckpt_write": {"mb_per_s": 25_000.0}},
                         status="PASS", cluster={"instance_type": "p5.48xlarge",
                                                 "twin": False})
    db = tmp_path / "results.db"
    with ResultStore(db) as store:
        fid, sid = store.add(fsdp), store.add(storage)
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--from-record", fid[:8],
                       "--db", str(db), "--nodes", "2")
    assert code == 0
    assert plan["inputs"]["mfu"]["value"] == 0.34
    assert plan["inputs"]["mfu"]["source"].startswith(f"record {fid[:12]}")
    assert plan["inputs"]["checkpoint_write_gb_per_s"]["value"] == pytest.approx(10.45)
    assert plan["inputs"]["instance_type"]["source"].startswith("the record's cluster")
    assert not plan["notes"]  # measured on 16 GPUs of p5.48xlarge with 8b: as planned
    # measured elsewhere than planned: used, and said so
    code, plan = _plan(capsys, "--model", "70b", "--tokens", "1T", "--from-record", fid,
                       "--db", str(db), "--instance-type", "p5en.48xlarge")
    assert plan["inputs"]["mfu"]["value"] == 0.34
    assert plan["nodes"] == 4
    assert plan["notes"] == [
        "the MFU was measured on p5.48xlarge, the plan is for p5en.48xlarge: the same MFU "
        "is assumed",
        "the MFU was measured with model 8b, the plan is for 70b: the same MFU is assumed",
        "the MFU was measured on 16 GPUs and is assumed to hold on 32: scaling losses beyond "
        "the measured size are not modelled (measure at a larger size to see them)"]
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--from-record", sid,
                       "--db", str(db))
    assert plan["inputs"]["checkpoint_write_gb_per_s"]["value"] == 25.0
    assert "ckpt_write" in plan["inputs"]["checkpoint_write_gb_per_s"]["source"]
    assert plan["checkpoint"]["write_seconds"] == pytest.approx(96_363_134_976 / 25e9)


@pytest.mark.parametrize(("argv", "message"), [
    (["--tokens", "-1"], "--tokens must be positive (got -1)"),
    (["--tokens", "lots"], "--tokens 'lots' is not a number"),
    (["--gpu", "H900"], "unknown GPU 'H900'"),
    (["--model", "70b", "--nodes", "1"], "the model does not fit the cluster"),
    (["--params", "5e12", "--gpus", "64"], "the model does not fit the cluster"),
    (["--model", "13b"], "unknown model preset '13b'"),
    (["--instance-type", "p9.48xlarge"], "instance type 'p9.48xlarge': facts unknown"),
    (["--instance-type", "c5.4xlarge"], "c5.4xlarge has no NVIDIA GPU"),
    (["--mfu", "40"], "--mfu must be a fraction in (0, 1]"),
    (["--nodes", "2", "--days", "3"], "--days and --budget solve for the size"),
    (["--model", "8b", "--days", "0.001"], "no size finishes in 0.001 days"),
    (["--budget", "5"], "--budget $5 is below the cheapest plan"),
    (["--from-record", "nosuchid"], "no result with id 'nosuchid'"),
])
def test_impossible_input_is_one_line_and_exit_2(argv, message, tmp_path):
    r = _pctk("plan", *argv, "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("pctk: error: ") and message in lines[0], lines[0]


@pytest.mark.parametrize(("text", "usd"), [
    ("$500,000", 500_000), ("500k", 500_000), ("500,000", 500_000), ("$500K", 500_000),
    ("1.2M", 1_200_000), ("$1.2M", 1_200_000), ("1e6", 1_000_000)])
def test_budget_in_dollars(capsys, text, usd):
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--budget", text)
    assert code == 0
    assert plan["inputs"]["budget_usd"]["value"] == usd
    assert plan["cost_usd"]["on_demand"]["usd"] <= usd


@pytest.mark.parametrize("text", ["500 dollars", "$", "€500", "$$5", "five"])
def test_a_budget_that_is_no_amount_is_one_line(text, tmp_path):
    r = _pctk("plan", "--budget", text)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"pctk: error: --budget {text!r} is not an amount of US dollars; "
                        "fix: write e.g. 500000, $500,000, 500k or 1.2M\n")


def _gpu_fsdp_record(seq_len: int) -> dict[str, Any]:
    rec = fsdp_record(mfu=0.34)
    rec["cluster"]["twin"] = False
    rec["params"].update(model="8b", seq_len=seq_len, device="cuda")
    return rec


def test_a_plan_from_a_record_uses_the_sequence_length_its_mfu_was_measured_at(capsys,
                                                                              tmp_path):
    """`bench fsdp` picks 4,096 on GPUs; the 8b preset's 8,192 would apply the MFU to another
    FLOPs count: 6N + 12 x 32 x 32 x 128 x 4,096 = 45,029,548,032 + 6,442,450,944."""
    db = tmp_path / "results.db"
    with ResultStore(db) as store:
        rid = store.add(_gpu_fsdp_record(4096))
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--from-record", rid,
                       "--db", str(db))
    assert code == 0
    seq = plan["inputs"]["seq_len"]
    assert seq["value"] == 4096
    assert seq["source"].startswith(f"record {rid[:12]}")
    assert seq["source"].endswith(": the sequence length its MFU was measured at")
    assert plan["flops_per_token"] == 51_471_998_976
    assert plan["global_batch"]["tokens_per_step"] == 32 * 4096
    # another --seq-len would apply the MFU to another FLOPs count: refused
    r = _pctk("plan", "--model", "8b", "--from-record", rid, "--db", str(db), "--seq-len",
              "8192")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("pctk: error: --seq-len 8,192 is not the sequence length the "
                               f"MFU of record {rid[:12]}")
    assert "was measured at (4,096)" in r.stderr and len(r.stderr.splitlines()) == 1
    # ... unless the MFU is given too
    code, plan = _plan(capsys, "--model", "8b", "--from-record", rid, "--db", str(db),
                       "--seq-len", "8192", "--mfu", "0.3")
    assert code == 0 and plan["inputs"]["seq_len"]["value"] == 8192
    # a record that does not say it: the default, and a note that says so
    rec = _gpu_fsdp_record(4096)
    del rec["params"]["seq_len"]
    with ResultStore(db) as store:
        old = store.add(rec)
    code, plan = _plan(capsys, "--model", "8b", "--from-record", old, "--db", str(db))
    assert plan["inputs"]["seq_len"]["value"] == 8192
    assert any("does not say its sequence length" in n for n in plan["notes"])


def test_an_expired_price_is_not_printed_as_a_cost_and_a_shard_keeps_nodes_whole(capsys):
    assert main(["plan", "--model", "70b", "--tokens", "2T", "--nodes", "130"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("capacity block"))
    assert "n/a: the rate on record ($39.33/h" in line and "expired on 2025-01-01" in line
    assert "smallest shard that fits: none without AC, 40 with AC" in out
    # 26 of 1,040 GPUs divides them but splits a node of 8 between two shard groups
    code = main(["plan", "--model", "70b", "--tokens", "2T", "--nodes", "130",
                 "--strategy", "hsdp", "--shard-size", "26"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--shard-size 26 splits a node of 8 GPUs" in err


def test_two_records_that_both_give_an_mfu_are_refused_in_one_line(capsys, tmp_path):
    """The MFU came from the last FSDP record and the instance type from the first: an A100's
    plan at an H100's MFU, without a note. One record gives each figure."""
    a100 = fsdp_record(mfu=0.52, name="train-a100")
    a100["cluster"].update(twin=False, instance_type="p4d.24xlarge")
    h100 = fsdp_record(mfu=0.34)
    h100["cluster"]["twin"] = False
    storage = [new_record("storage", metrics={"ckpt_write": {"mb_per_s": rate}}, status="PASS",
                          cluster={"instance_type": "p5.48xlarge", "twin": False})
               for rate in (25_000.0, 9_000.0)]
    db = tmp_path / "results.db"
    with ResultStore(db) as store:
        ids = [store.add(r) for r in (a100, h100, *storage)]
    code = main(["plan", "--model", "8b", "--tokens", "1T", "--db", str(db),
                 "--from-record", ids[0], "--from-record", ids[1]])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert ids[0][:12] in err and ids[1][:12] in err and "pass one FSDP record" in err
    code = main(["plan", "--model", "8b", "--tokens", "1T", "--db", str(db),
                 "--from-record", ids[2], "--from-record", ids[3]])
    err = capsys.readouterr().err
    assert code == 2 and "pass one storage record" in err, err
    # one of each: the MFU and instance type of the FSDP record, the storage record's rate
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--db", str(db),
                       "--from-record", ids[0], "--from-record", ids[2])
    assert code == 0
    assert plan["inputs"]["mfu"]["value"] == 0.52
    assert plan["inputs"]["instance_type"]["value"] == "p4d.24xlarge"
    assert plan["inputs"]["checkpoint_write_gb_per_s"]["value"] == 25.0


def test_a_config_in_another_region_is_told_whose_price_it_gets(capsys, tmp_path):
    """The catalog's on-demand prices are us-east-1's: a team's us-west-2 config was planned
    at them without a word."""
    preset = (REPO / "cluster-configs" / "p5-training.yaml").read_text()
    west = tmp_path / "west.yaml"
    west.write_text(preset.replace("Region: us-east-1", "Region: us-west-2"))
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--config", str(west))
    assert code == 0
    assert ("the on-demand price is the catalog's for us-east-1; --config runs in us-west-2, "
            "where it may differ") in plan["notes"]
    code, plan = _plan(capsys, "--model", "8b", "--tokens", "1T", "--config",
                       str(REPO / "cluster-configs" / "p5-training.yaml"))
    assert code == 0 and not any("on-demand price" in n for n in plan["notes"])
