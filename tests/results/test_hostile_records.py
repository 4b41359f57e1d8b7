"""Records that are valid JSON and a valid envelope, but whose params or metrics are not what
readers compute with (``benchmarks.record.KIND_FIELDS``): one check at the store's door
refuses them in one line naming the field, and a reader that meets one already in a
database (an older pctk stored it) skips it and names it. Before that check, ``results
add`` took all of these, and ``diagnose``, ``plan --from-record``, ``report`` and the
others then died with a traceback or used a 1e308 GB/s checkpoint rate."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.fsdp.config import ModelArgs
from benchmarks.record import MODEL_DIMS, dumps_record, new_record, validate_record
from benchmarks.serving.load import summarize
from toolkit.health.slownodes import PairResult, run_sweep, to_record
from toolkit.results.scaling import scaling_record, study

from . import records
from .conftest import Run

REPO = Path(__file__).resolve().parents[2]
MISSING = object()  # remove the field
INF = "@@inf@@"  # written as the JSON number 1e400, which reads as infinity


def fsdp() -> dict[str, Any]:
    return records.fsdp_breakdown_record()


def fsdp_workload(name: str, section: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        rec = fsdp()
        rec["params"]["workload"] = name
        rec["metrics"][name] = section
        return rec
    return build


def scaling() -> dict[str, Any]:
    """What `pctk bench scaling` stores: the study of an fsdp run at 1 and 2 nodes."""
    one, two = fsdp(), fsdp()
    one["params"].update(nodes=1, world_size=8)
    result = study([one, two], strong=False)
    return scaling_record([one, two], result, {"mode": "weak", "model": "8b"})


def slow_nodes() -> dict[str, Any]:
    """`pctk health slow-nodes` over four nodes, one of them slow."""
    speed = {"n1": 40.0, "n2": 41.0, "n3": 39.0, "n4": 2.0}
    rec = to_record(run_sweep(list(speed), lambda rnd, pairs: [
        PairResult(rnd, (a, b), min(speed[a], speed[b])) for a, b in pairs]))
    rec["created"] = "2026-01-01T00:00:00Z"
    return rec


def inference() -> dict[str, Any]:
    """The layout of benchmarks.inference.bench's merged record."""
    return new_record("inference", params={"model": "8b", "mode": "offline"}, metrics={
        "decode": [{"batch": 1, "tokens_per_s": 140.0, "tpot_s": 0.0071},
                   {"batch": 8, "tokens_per_s": 1050.0, "tpot_s": 0.0076}],
        "prefill": [{"prompt_len": 512, "tokens_per_s": 21000.0, "ttft_s": 0.024}],
        "roofline": {"judged": True, "decode": [
            {"batch": 1, "fraction": 0.62, "bound_tokens_per_s": 226.0, "limit": "memory"}],
            "prefill": []}},
        status="PASS", cluster=records.cluster(), software=dict(records.SOFTWARE),
        describe_this_machine=False)


def storage() -> dict[str, Any]:
    """The layout of benchmarks.storage.aggregate's record."""
    return new_record("storage", params={"nodes": 2, "target": "/fsx/bench"}, metrics={
        "seq_write": {"mb_per_s": 9800.0}, "seq_read": {"mb_per_s": 11200.0},
        "ckpt_write": {"mb_per_s": 25000.0}, "rand_read": {"iops": 180000.0},
        "expected_mb_per_s": 12000.0},
        status="PASS", cluster=records.cluster(), software=dict(records.SOFTWARE),
        describe_this_machine=False)


def serving() -> dict[str, Any]:
    rows = [{"ok": True, "error": None, "ttft_s": 0.1, "tpot_s": 0.01, "itl_s": [0.01] * 3,
             "e2e_s": 0.13, "output_tokens": 4, "prompt_tokens": 8}] * 8
    level = summarize(rows, concurrency=4, wall=1.0, slo_ttft=1, slo_tpot=1)
    return new_record("serving", params={"backend": "vllm"}, metrics={"levels": [level]},
                      status="PASS", cluster=records.cluster(), software=dict(records.SOFTWARE),
                      describe_this_machine=False)


# (name, a good record, the field to spoil, its new value, what the one line says)
HOSTILE: list[tuple[str, Callable[[], dict[str, Any]], str, Any, str]] = [
    # pctk diagnose: KeyError 'model_args', ModelArgs.__init__() missing an argument,
    # ZeroDivisionError, "'<=' not supported between 'str' and 'int'"...
    ("fsdp: no model_args", fsdp, "params.model_args", MISSING,
     "params.model_args: missing, and a fsdp record with metrics.breakdown needs it"),
    ("fsdp: model_args without n_heads", fsdp, "params.model_args.n_heads", MISSING,
     "params.model_args.n_heads: missing"),
    ("fsdp: model_args.dim as text", fsdp, "params.model_args.dim", "4096",
     "params.model_args.dim: '4096' is not a whole number"),
    ("fsdp: model_args a list", fsdp, "params.model_args", [4096, 32],
     "params.model_args: [4096, 32] is not an object"),
    ("fsdp: zero heads", fsdp, "params.model_args.n_heads", 0,
     "params.model_args.n_heads: 0 is out of range"),
    ("fsdp: world_size as text", fsdp, "params.world_size", "16",
     "params.world_size: '16' is not a whole number"),
    ("fsdp: nodes as text", fsdp, "params.nodes", "2", "params.nodes: '2' is not"),
    ("fsdp: fractional ranks_per_node", fsdp, "params.ranks_per_node", 7.5,
     "params.ranks_per_node: 7.5 is not a whole number"),
    ("fsdp: breakdown parts an int", fsdp, "metrics.breakdown.parts", 6,
     "metrics.breakdown.parts: 6 is not a list"),
    ("fsdp: breakdown parts not text", fsdp, "metrics.breakdown.parts", [{"a": 1}],
     "metrics.breakdown.parts[0]: {'a': 1} is not text"),
    ("fsdp: breakdown without its step", fsdp, "metrics.breakdown.mean_over_ranks.step",
     MISSING, "metrics.breakdown.mean_over_ranks.step: missing"),
    ("fsdp: negative step time", fsdp, "metrics.breakdown.mean_over_ranks.step", -1.4,
     "metrics.breakdown.mean_over_ranks.step: -1.4 is out of range"),
    ("fsdp: per-rank row an int", fsdp, "metrics.breakdown.per_rank.3", 7,
     "metrics.breakdown.per_rank[3]: 7 is not an object"),
    ("fsdp: 1e308 GB/s link", fsdp, "metrics.breakdown.per_rank.9.link_recv_gb_per_s",
     1e308, "metrics.breakdown.per_rank[9].link_recv_gb_per_s: 1e+308 is out of range"),
    ("fsdp: 1e308 GB/s checkpoint", fsdp, "metrics.checkpoint_saves.0.gb_per_s", 1e308,
     "metrics.checkpoint_saves[0].gb_per_s: 1e+308 is out of range"),
    ("fsdp: infinite GB/s checkpoint", fsdp, "metrics.checkpoint_saves.0.gb_per_s", INF,
     "record.metrics.checkpoint_saves[0].gb_per_s: inf is not a finite number"),
    ("fsdp: negative GB/s checkpoint", fsdp, "metrics.checkpoint_saves.1.gb_per_s", -10.8,
     "metrics.checkpoint_saves[1].gb_per_s: -10.8 is out of range"),
    ("fsdp: checkpoint rate as text", fsdp, "metrics.checkpoint_saves.1.gb_per_s", "fast",
     "metrics.checkpoint_saves[1].gb_per_s: 'fast' is not a number"),
    ("fsdp: checkpoint save without seconds", fsdp, "metrics.checkpoint_saves.1.seconds",
     MISSING, "metrics.checkpoint_saves[1].seconds: missing"),
    ("fsdp: checkpoint_saves a number", fsdp, "metrics.checkpoint_saves", 3.5,
     "metrics.checkpoint_saves: 3.5 is not a list"),
    ("fsdp: stragglers a list", fsdp, "metrics.stragglers", ["n1"],
     "metrics.stragglers: ['n1'] is not an object"),
    ("fsdp: straggler seconds as text", fsdp, "metrics.stragglers.local_s", "0.09",
     "metrics.stragglers.local_s: '0.09' is not a number"),
    ("fsdp: 1.7e308 MFU", fsdp, "metrics.mfu", 1.7e308, "metrics.mfu: 1.7e+308 is out of"),
    ("fsdp: negative tokens/s", fsdp, "metrics.tokens_per_s_per_gpu", -1e300,
     "metrics.tokens_per_s_per_gpu: -1e+300 is out of range"),
    ("sft: real MFU as text", fsdp_workload("sft", {"workload": "sft", "real_mfu": 0.3}),
     "metrics.sft.real_mfu", "high", "metrics.sft.real_mfu: 'high' is not a number"),
    ("rl: phase times a list", fsdp_workload("rl", {"workload": "rl", "bound_by": "reward"}),
     "metrics.rl.phase_mean_s", [1.0, 2.0], "metrics.rl.phase_mean_s: [1.0, 2.0] is not an"),
    # report and trend: KeyError 'nodes', "'<' not supported between 'str' and 'int'"
    ("scaling: a size's nodes as text", scaling, "metrics.sizes.0.nodes", "1",
     "metrics.sizes[0].nodes: '1' is not a whole number"),
    ("scaling: sizes an object", scaling, "metrics.sizes", {"1": {}},
     "metrics.sizes: {'1': {}} is not a list"),
    ("scaling: a size without its step", scaling, "metrics.sizes.1.step_s", MISSING,
     "metrics.sizes[1].step_s: missing"),
    # results list: "'int' object is not iterable"
    ("slow-nodes: blamed an int", slow_nodes, "metrics.blamed", 5,
     "metrics.blamed: 5 is not a list"),
    ("slow-nodes: 1e308 GB/s median", slow_nodes, "metrics.median_gbps", 1e308,
     "metrics.median_gbps: 1e+308 is out of range"),
    # every reader of inference records: "unhashable type: 'list'"
    ("inference: roofline batch a list", inference, "metrics.roofline.decode.0.batch", [1],
     "metrics.roofline.decode[0].batch: [1] is not a whole number"),
    ("inference: negative tokens/s", inference, "metrics.decode.1.tokens_per_s", -5.0,
     "metrics.decode[1].tokens_per_s: -5.0 is out of range"),
    ("nccl-tests: 1e308 GB/s busbw", records.nccl_record,
     "metrics.collectives.0.rows.30.out_of_place.busbw_gbps", 1e308,
     "metrics.collectives[0].rows[30].out_of_place.busbw_gbps: 1e+308 is out of range"),
    ("collectives: ranks as text", records.collectives_record, "metrics.collectives.1.nranks",
     "16", "metrics.collectives[1].nranks: '16' is not a whole number"),
    # plan --from-record: a 1e308 MB/s checkpoint write planned with as it was
    ("storage: 1e308 MB/s checkpoint write", storage, "metrics.ckpt_write.mb_per_s", 1e308,
     "metrics.ckpt_write.mb_per_s: 1e+308 is out of range"),
    ("storage: nodes as text", storage, "params.nodes", "2", "params.nodes: '2' is not"),
    ("health: nodes a list", records.health_record, "metrics.nodes", ["gpu-st-p5-1"],
     "metrics.nodes: ['gpu-st-p5-1'] is not an object"),
    ("serving: concurrency as text", serving, "metrics.levels.0.concurrency", "4",
     "metrics.levels[0].concurrency: '4' is not a whole number"),
]
IDS = [name for name, *_ in HOSTILE]
GOOD = (fsdp, scaling, slow_nodes, inference, storage, serving, records.nccl_record,
        records.collectives_record, records.health_record, records.fsdp_record)


@functools.cache
def built(build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return build()


def spoiled(build: Callable[[], dict[str, Any]], where: str, value: Any) -> dict[str, Any]:
    rec = copy.deepcopy(built(build))
    *parents, last = where.split(".")
    holder: Any = rec
    for key in parents:
        holder = holder[int(key)] if isinstance(holder, list) else holder[key]
    key: Any = int(last) if isinstance(holder, list) else last
    if value is MISSING:
        del holder[key]
    else:
        holder[key] = value
    return rec


def record_text(rec: dict[str, Any]) -> str:
    """The record as a file holds it, with :data:`INF` as a JSON number out of range."""
    return json.dumps(rec).replace(f'"{INF}"', "1e400")


def hostile(index: int) -> tuple[dict[str, Any], str]:
    """``HOSTILE[index]`` with an id of its own, and its text as a file holds it."""
    _, build, where, value, _ = HOSTILE[index]
    rec = spoiled(build, where, value)
    rec["id"] = f"bad{index:03d}" + "0" * 26
    return rec, record_text(rec)


def one_line_error(code: int, out: str, err: str) -> str:
    assert "Traceback" not in out + err, err
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pctk: error: "), err
    return lines[0]


@pytest.mark.parametrize("build", GOOD, ids=lambda b: b.__name__)
def test_records_the_benchmarks_write_pass(build: Callable[[], dict[str, Any]]) -> None:
    validate_record(json.loads(dumps_record(build())))


def test_model_args_required_are_the_fields_a_model_shape_cannot_do_without() -> None:
    needed = [f.name for f in dataclasses.fields(ModelArgs)
              if f.default is dataclasses.MISSING]
    assert list(MODEL_DIMS) == needed


@pytest.mark.parametrize("index", range(len(HOSTILE)), ids=IDS)
def test_a_hostile_record_file_is_refused_in_one_line_naming_the_field(
        index: int, tmp_path: Path, db: Path, pctk: Run) -> None:
    _, text = hostile(index)
    path = tmp_path / "record.json"
    path.write_text(text)
    fragment = HOSTILE[index][4]
    for argv in (("results", "add", path), ("diagnose", path),
                 ("plan", "--from-record", path, "--json")):
        line = one_line_error(*pctk(*argv, "--db", db))
        assert line.startswith(f"pctk: error: {path}: {fragment}"), (argv, line)
    assert pctk("results", "list", "--json", "--db", db)[1].strip() == "[]"


@pytest.fixture
def poisoned(tmp_path: Path, db: Path, pctk: Run) -> dict[str, tuple[str, str]]:
    """Good records of every kind with baselines, then every hostile record written into the
    database directly (as an older pctk would have stored it), newer than the good ones:
    {hostile id: (kind, what the one line says)}."""
    files = []
    for n, build in enumerate(GOOD):
        files.append(tmp_path / f"good{n}.json")
        files[-1].write_text(dumps_record({**built(build), "created": "2026-01-01T00:00:00Z"}))
    assert pctk("results", "add", *files, "--baseline", "--db", db)[0] == 0
    bad = {}
    conn = sqlite3.connect(db)
    with conn:
        for index, (*_, fragment) in enumerate(HOSTILE):
            rec, text = hostile(index)
            conn.execute(
                "INSERT INTO results (id, kind, created, cluster, instance_type, nodes, status,"
                " record, ingested) VALUES (?, ?, ?, ?, ?, ?, 'PASS', ?, ?)",
                (rec["id"], rec["kind"], "2026-02-01T00:00:00Z", rec["cluster"]["name"] or "",
                 rec["cluster"]["instance_type"] or "", rec["cluster"]["nodes"], text,
                 "2026-02-01T00:00:00Z"))
            bad[rec["id"]] = (rec["kind"], fragment)
    conn.close()
    return bad


def skipped(err: str) -> dict[str, str]:
    """{id: reason} of the "warning: skipped stored result ID: REASON" lines."""
    found = {}
    for line in err.splitlines():
        if line.startswith("warning: skipped stored result "):
            rid, reason = line.removeprefix("warning: skipped stored result ").split(": ", 1)
            assert rid not in found, err
            found[rid] = reason
    return found


# every reader of many records, with the kinds it does not read
READERS: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
    (("results", "list", "--limit", "100"), ()),
    (("results", "compare", "--json"), ("scaling", "slow-nodes")),
    (("results", "trend", "--json"), ("slow-nodes",)),
    (("results", "prometheus"), ()),  # every kind: the overall verdict reads them all
    (("report", "--out", "REPORT"), ()),
]


def read_by(unread: tuple[str, ...], poisoned: dict[str, tuple[str, str]]) -> dict[str, str]:
    return {rid: fragment for rid, (kind, fragment) in poisoned.items() if kind not in unread}


@pytest.mark.parametrize(("argv", "unread"), READERS, ids=[" ".join(a) for a, _ in READERS])
def test_every_reader_skips_and_names_each_hostile_stored_record(
        argv: tuple[str, ...], unread: tuple[str, ...], tmp_path: Path, db: Path, pctk: Run,
        poisoned: dict[str, tuple[str, str]]) -> None:
    args = [str(tmp_path / "report.html") if a == "REPORT" else a for a in argv]
    code, out, err = pctk(*args, "--db", db)
    assert "Traceback" not in err and "pctk: error" not in err, err
    assert code in (0, 1), err  # compare may find a regression
    named, expected = skipped(err), read_by(unread, poisoned)
    assert sorted(named) == sorted(expected), err
    for rid, fragment in expected.items():
        assert named[rid].startswith(fragment), (rid, named[rid])
    assert not any(rid in out for rid in poisoned)
    assert len(err.strip().splitlines()) == len(named), err  # nothing else on stderr


def test_a_hostile_stored_record_named_by_id_is_a_one_line_error(
        db: Path, pctk: Run, poisoned: dict[str, tuple[str, str]]) -> None:
    for rid, (_, fragment) in poisoned.items():
        for argv in (("diagnose", rid), ("plan", "--from-record", rid, "--json"),
                     ("results", "show", rid), ("results", "compare", rid),
                     ("results", "baseline", rid)):
            line = one_line_error(*pctk(*argv, "--db", db))
            assert line.startswith(f"pctk: error: stored result {rid} cannot be used: "
                                   f"{fragment}"), (argv, line)


def test_the_console_entry_in_its_own_process(tmp_path: Path, db: Path,
                                              poisoned: dict[str, tuple[str, str]]) -> None:
    """The real process (``python -m toolkit.cli``): one line or named skips, never a
    traceback, from the file readers and the store's readers alike."""
    def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "toolkit.cli", *map(str, argv), "--db",
                               str(db)], capture_output=True, text=True, cwd=REPO, timeout=300)

    _, text = hostile(0)  # no model_args
    path = tmp_path / "record.json"
    path.write_text(text)
    for argv in (("results", "add", path), ("diagnose", path),
                 ("plan", "--from-record", path)):
        res = run(*argv)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1 and "params.model_args: missing" in res.stderr
    for argv, unread in READERS:
        res = run(*[tmp_path / "r.html" if a == "REPORT" else a for a in argv])
        assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res.stderr
        assert sorted(skipped(res.stderr)) == sorted(read_by(unread, poisoned)), res.stderr
