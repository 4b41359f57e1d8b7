"""sft and rl records in the results store: `pctk results list/show` name the workload's
figures, the report draws the RL phase split per iteration, and compare does not hold an sft
run against a pre-training baseline. Records come from real one-rank runs of the node."""

from __future__ import annotations

import copy
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fsdp.fsdp_launch import run_ranks
from toolkit.results.compare import compare_records
from toolkit.results.metrics import headline, training_scalars
from toolkit.results.store import ResultStore


def run(tmp: Path, name: str, args: list[str]) -> dict[str, Any]:
    r = run_ranks(1, ["--model", "tiny", "--batch-size", "2", "--steps", "4",
                      "--timing-warmup", "1", *args], tmp / f"{name}.json")
    assert r.returncodes == [0] and r.record is not None, r.output
    rec = r.record
    rec["cluster"].update(name="train-a", instance_type="p5.48xlarge")
    return rec


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("posttrain")
    return {"pretrain": run(tmp, "pretrain", ["--seq-len", "32"]),
            "sft": run(tmp, "sft", ["--workload", "sft", "--seq-len", "512"]),
            "rl": run(tmp, "rl", ["--workload", "rl", "--rl-group", "2",
                                  "--rl-new-tokens", "4"])}


def test_headlines_and_scalars_name_the_workload(records: dict[str, dict[str, Any]]) -> None:
    sft, rl = records["sft"], records["rl"]
    assert "real tok/s/GPU" in headline(sft) and "% unpacked" in headline(sft)
    assert headline(rl).startswith("rl, bound by ") and "generation" in headline(rl)
    assert "sft" not in headline(records["pretrain"])
    s = training_scalars(sft)
    assert s["sft_padding_fraction_packed"] < s["sft_padding_fraction_unpacked"]
    r = training_scalars(rl)
    assert {f"rl_phase_{p}_s" for p in ("generation", "reward", "training", "weight_sync")} \
        <= set(r)
    assert sum(v for k, v in r.items() if k.startswith("rl_fraction_")) == pytest.approx(1)


def test_results_show_and_list(records: dict[str, dict[str, Any]], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    db = tmp_path / "results.db"
    with ResultStore(db) as store:
        ids = {name: store.add(rec) for name, rec in records.items()}
    assert main(["results", "list", "--db", str(db)]) == 0
    listed = capsys.readouterr().out
    assert "real tok/s/GPU" in listed and "bound by" in listed
    assert main(["results", "show", ids["rl"], "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "rl_phase_generation_s" in shown and "rl_generation_tokens_per_s_per_gpu" in shown


def test_report_draws_the_phase_split_per_iteration(records: dict[str, dict[str, Any]],
                                                    tmp_path: Path) -> None:
    from toolkit.results.report import build_report

    store = ResultStore(tmp_path / "results.db")
    for rec in records.values():
        store.add(rec)
    html = build_report(store)
    section = html.split("<h2>Training: throughput and MFU</h2>", 1)[1].split("</section>")[0]
    # 4 iterations x 4 phases
    assert 'alt="RL phase split per iteration, train-a' in section
    assert 'data-points="16"' in section
    assert "[sft]" in section or "[rl]" in section  # own series, not mixed with pretraining


def test_compare_does_not_judge_sft_against_a_pretraining_baseline(
        records: dict[str, dict[str, Any]]) -> None:
    comp = compare_records(records["sft"], records["pretrain"])
    assert comp.points == [] and comp.regressions == []
    assert "not comparable" in comp.notes[0]
    later = copy.deepcopy(records["sft"])
    later["id"] = uuid.uuid4().hex
    assert compare_records(later, records["sft"]).points  # same workload: compared


def test_bench_fsdp_passes_the_workload_and_an_absolute_data_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from toolkit.cli import app

    (tmp_path / "chat.jsonl").write_text('{"prompt": "a", "completion": "b"}\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["bench", "fsdp", "--model", "tiny", "--workload", "sft",
                                      "--data", "chat.jsonl", "--dry-run", "--run-dir", "/x"])
    assert result.exit_code == 0, result.output
    assert f"--workload sft --data {tmp_path / 'chat.jsonl'}" in result.output
    assert "--seq-len 1024" in result.output  # the sft row length on CPU shapes
    helped = CliRunner().invoke(app, ["bench", "fsdp", "--help"], env={"COLUMNS": "200"})
    assert "--workload" in helped.output and "GRPO-style" in helped.output


def test_bench_fsdp_missing_data_file_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    assert main(["bench", "fsdp", "--workload", "sft", "--data", str(tmp_path / "no.jsonl"),
                 "--dry-run"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_bench_fsdp_data_without_the_sft_workload_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The node reads --data only for SFT: a pre-training run given chat data ran on synthetic
    tokens without a word."""
    from toolkit.cli import main

    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"prompt": "a", "completion": "b"}\n')
    for workload in ([], ["--workload", "rl"]):
        assert main(["bench", "fsdp", "--model", "tiny", *workload, "--data", str(chat),
                     "--dry-run", "--run-dir", "/x"]) == 2
        err = capsys.readouterr().err
        assert "--data is the chat data of --workload sft" in err, err
        assert len(err.strip().splitlines()) == 1


def test_bench_fsdp_data_that_is_a_fifo_or_a_folder_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    fifo = tmp_path / "chat.fifo"
    os.mkfifo(fifo)  # `--data <(zcat chat.jsonl.gz)`: the nodes would each need the stream
    for data, kind in ((fifo, "a FIFO"), (tmp_path, "a directory")):
        assert main(["bench", "fsdp", "--workload", "sft", "--data", str(data),
                     "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"pctk: error: --data {data}: not a regular file ({kind}); fix: ")
        assert "no such file" not in err and len(err.strip().splitlines()) == 1


def test_automatic_baseline_keeps_workloads_apart(records: dict[str, dict[str, Any]]) -> None:
    from toolkit.results.baseline import auto_compare

    def later(rec: dict[str, Any], hours: int) -> dict[str, Any]:
        out = copy.deepcopy(rec)
        out["id"] = uuid.uuid4().hex
        out["created"] = f"2099-01-01T{hours:02d}:00:00Z"
        return out

    history = [later(records["pretrain"], h) for h in range(3)]
    sft = later(records["sft"], 5)
    sft["metrics"]["tokens_per_s_per_gpu"] = 1.0  # far below any pre-training run
    judged = auto_compare(sft, history)
    assert judged.points == [] and judged.regressions == []
    assert any("0 earlier passing run(s)" in n for n in judged.notes)
    history += [later(records["sft"], h) for h in (6, 7, 8)]
    slow = later(records["sft"], 9)
    slow["metrics"]["tokens_per_s_per_gpu"] = records["sft"]["metrics"]["tokens_per_s_per_gpu"] / 2
    assert [p.metric for p in auto_compare(slow, history).regressions] == [
        "tokens_per_s_per_gpu"]


def test_bench_summary_rows_show_the_workload(records: dict[str, dict[str, Any]]) -> None:
    from toolkit.bench.fsdp.driver import summary_rows

    sft = dict(summary_rows(records["sft"]))
    assert sft["workload"] == "sft, packed"
    assert "packed" in sft["padding"] and "one per row" in sft["padding"]
    rl = dict(summary_rows(records["rl"]))
    assert rl["workload"] == "rl (GRPO-style)" and rl["bound by"] in (
        "generation", "reward", "training", "weight_sync")
    assert "generation" in rl["phase split"]
    assert "workload" not in dict(summary_rows(records["pretrain"]))


def test_prometheus_keeps_each_workload_as_its_own_series(
        records: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    from tests.results.promparse import parse
    from toolkit.results.prometheus import write_textfile

    store = ResultStore(tmp_path / "results.db")
    for name in ("pretrain", "sft", "rl"):  # the rl run is the newest of the group
        store.add(records[name])
    path, _n = write_textfile(store, tmp_path / "pctk.prom", 0.05)
    samples = parse(path.read_text())["pctk_fsdp_gpu_tokens_per_second"]["samples"]
    by_workload = {labels.get("workload", ""): value for labels, value in samples}
    assert by_workload == {
        "": records["pretrain"]["metrics"]["tokens_per_s_per_gpu"],
        "sft": records["sft"]["metrics"]["tokens_per_s_per_gpu"],
        "rl": records["rl"]["metrics"]["tokens_per_s_per_gpu"]}


def test_bench_fsdp_passes_rl_settings_and_the_learning_rate_to_the_node(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`bench fsdp` offered no --lr or --rl-* option, so the RL loop ran with its defaults
    whatever the user meant; given to a pre-training run they are refused, not ignored."""
    from toolkit.cli import main

    base = ["bench", "fsdp", "--model", "tiny", "--tasks-per-node", "1", "--gpus-per-node", "0",
            "--dry-run", "--run-dir", "/x"]
    assert main([*base, "--workload", "rl", "--lr", "0.01", "--rl-group", "4",
                 "--rl-updates", "2"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "benchmarks.fsdp.train" in x)
    assert line.endswith("--workload rl --lr 0.01 --rl-group 4 --rl-updates 2"), line
    assert main([*base, "--rl-updates", "2"]) == 2
    err = capsys.readouterr().err
    assert "--rl-updates: settings of --workload rl; a pretrain run does not read them" in err
