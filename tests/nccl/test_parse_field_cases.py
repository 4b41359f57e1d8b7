"""Shapes real nccl-tests output takes in the field (GUIDE section 7), built from real logs.

- several runs in one file, as a shell loop ``for t in ...; do ./build/${t}_perf; done >
  log`` leaves them (real fixture logs concatenated);
- pastes without the column header (fixture 15: issue 294's rows as published; and real
  fixtures with their header lines cut);
- N processes that each ran alone (fixture 15; fixture 09 interleaved with itself, as two
  lone processes print), runs whose rank count disagrees with the launch;
- the algorithm NCCL ran, from real INFO lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.bench.comm.algorithm import AlgorithmScanner, algorithm_from_setting
from toolkit.bench.comm.model import CollectiveRun
from toolkit.bench.comm.verdict import judge
from toolkit.bench.nccl import parse_nccl_file, parse_nccl_output

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SENDRECV = FIXTURES / "13_nccl-tests-331-sendrecv-a100-nthread2-info.log"
ALLGATHER_2019 = FIXTURES / "14_nccl-tests-37-allgather-v100-oldest-format-failed.log"
ALLREDUCE_1GPU = FIXTURES / "09_nccl-tests-287-allreduce-1gpu-5090-avg0.log"
EFA_16 = FIXTURES / "05_aws-efa-eks-p4d-16rank-oldformat-info.log"
NO_MPI_PASTE = FIXTURES / "15_nccl-tests-294-allreduce-16proc-nompi-headerless.log"


def _loop_log(tmp_path: Path, *parts: Path) -> Path:
    log = tmp_path / "loop.log"
    log.write_text("".join(p.read_text() for p in parts))
    return log


# --- 1. several runs in one file -------------------------------------------------------

def test_loop_log_labels_each_run_with_its_own_collective(tmp_path: Path) -> None:
    # 13 names no collective; 14 starts with its command line (all_gather_perf ...); 09
    # starts with a shell prompt running ./build/all_reduce_perf
    runs = parse_nccl_file(_loop_log(tmp_path, SENDRECV, ALLGATHER_2019, ALLREDUCE_1GPU))
    assert [r.collective for r in runs] == [None, "all_gather", "all_reduce"]
    assert [len(r.rows) for r in runs] == [29, 1, 25]
    assert all(r.complete for r in runs)
    # the unnamed run is not cross-checked with a borrowed factor
    assert runs[0].inconsistencies == []
    assert any("collective unknown" in n for n in runs[0].notes)
    assert [r.nranks for r in runs] == [2, None, 1]


def test_loop_log_with_collective_given_fills_only_the_unnamed_run(tmp_path: Path) -> None:
    runs = parse_nccl_file(_loop_log(tmp_path, SENDRECV, ALLGATHER_2019, ALLREDUCE_1GPU),
                           collective="sendrecv")
    assert [(r.collective, r.collective_source) for r in runs] == [
        ("sendrecv", "given"), ("all_gather", "command line in log"),
        ("all_reduce", "command line in log")]
    assert runs[0].inconsistencies == []


def test_trailing_lines_of_a_run_stay_with_it_and_hosts_are_per_run(tmp_path: Path) -> None:
    runs = parse_nccl_file(_loop_log(tmp_path, ALLREDUCE_1GPU, SENDRECV))
    assert [r.collective for r in runs] == ["all_reduce", None]
    assert [r.hosts for r in runs] == [["GENOA-06"], ["lrdn2296"]]
    assert runs[1].nccl_version == "2.22.3+cuda12.2" and runs[0].nccl_version is None


def test_crashed_run_in_a_loop_does_not_swallow_the_next(tmp_path: Path) -> None:
    crash = FIXTURES / "10_nccl-tests-287-allreduce-2gpu-crash-info.log"
    runs = parse_nccl_file(_loop_log(tmp_path, crash, SENDRECV, ALLREDUCE_1GPU))
    assert [(r.collective, r.complete, len(r.rows)) for r in runs] == [
        ("all_reduce", False, 0), (None, True, 29), ("all_reduce", True, 25)]
    assert [judge(r).status for r in runs] == ["FAIL", "PASS", "WARN"]
    assert all(r.separate_processes == 1 for r in runs)


def test_command_line_after_a_crash_labels_the_next_run(tmp_path: Path) -> None:
    text = SENDRECV.read_text()
    cut = text[:text.index("   268435456")] + "srun: error: node-3: task 1: Killed\n"
    log = tmp_path / "loop.log"
    log.write_text(cut + ALLREDUCE_1GPU.read_text())
    runs = parse_nccl_file(log)
    assert [(r.collective, r.complete) for r in runs] == [(None, False), ("all_reduce", True)]
    assert runs[0].failure_lines == ["srun: error: node-3: task 1: Killed"]


def _with_banner(path: Path, binary: str) -> str:
    """The log as nccl-tests >= 2.13 prints it: a version line, 'Collective test starting'
    before the preamble and 'Collective test concluded' after the footer."""
    body = "".join(ln for ln in path.read_text().splitlines(keepends=True)
                   if "$ " not in ln)   # drop the shell prompt: the banner names the test
    return ("# nccl-tests version 2.18.0 nccl-headers=22907 nccl-library=22907\n"
            f"# Collective test starting: {binary}\n{body}"
            f"# Collective test concluded: {binary}\n#\n\n")


def test_runs_named_by_their_banner_keep_their_names() -> None:
    text = (_with_banner(ALLREDUCE_1GPU, "all_reduce_perf_mpi") +
            "=== sendrecv rep 1 ===\n" + _with_banner(SENDRECV, "sendrecv_perf"))
    runs = parse_nccl_output(text)
    assert [(r.collective, r.collective_source) for r in runs] == [
        ("all_reduce", "log header"), ("sendrecv", "log header")]
    assert [r.nccl_tests_version for r in runs] == ["2.18.0", "2.18.0"]
    assert [len(r.rows) for r in runs] == [25, 29]


# --- 2. pastes without the column header -----------------------------------------------

def _without_header(path: Path) -> str:
    keep = []
    for line in path.read_text().splitlines(keepends=True):
        words = line.replace("#", " ").split()
        if words[-2:] == ["in-place"] or words[:3] in (["size", "count", "type"],
                                                       ["(B)", "(elements)", "(us)"],
                                                       ["(B)", "(elements)"]):
            continue
        if "<stdout>:" in line and ("out-of-place" in line or "size" in words[:2] or
                                    "(B)" in words[:2]):
            continue
        keep.append(line)
    return "".join(keep)


@pytest.mark.parametrize(("path", "fmt"), [(ALLREDUCE_1GPU, "new"), (EFA_16, "old"),
                                           (ALLGATHER_2019, "oldest")])
def test_rows_without_header_parse_as_with_it(path: Path, fmt: str) -> None:
    text = _without_header(path)
    assert "size         count" not in text
    with_header = parse_nccl_file(path, collective="all_reduce")[0]
    without = parse_nccl_output(text, collective="all_reduce", source=path.name)[0]
    assert without.format == fmt
    assert [r.to_dict() for r in without.rows] == [r.to_dict() for r in with_header.rows]
    assert any("no column header" in n for n in without.notes)
    assert without.avg_busbw_gbps == with_header.avg_busbw_gbps


def test_headerless_paste_from_issue_294_is_read(tmp_path: Path) -> None:
    run = parse_nccl_file(NO_MPI_PASTE, collective="all_reduce")[0]
    assert run.format == "new"
    assert [r.size_bytes for r in run.rows] == [134217728, 134217728, 536870912, 536870912,
                                                268435456]
    assert run.rows[2].in_place.algbw_gbps == 1747057.96  # type: ignore[union-attr]
    # unknown rank count: the factor cross-check is skipped and says why
    assert any("rank count unknown" in n for n in run.notes)


def test_unrelated_numeric_text_is_still_not_nccl_output() -> None:
    with pytest.raises(Exception, match="no nccl-tests output"):
        parse_nccl_output("8 2 float sum\n1 2 3 4 5 6 7 8 9 10 11 12 13\n", source="x.txt")


# --- 3. runs that measured nothing between ranks ----------------------------------------

def _interleaved(path: Path, copies: int) -> str:
    """The outputs of ``copies`` lone processes, their lines alternating."""
    lines = path.read_text().splitlines(keepends=True)
    return "".join(line for line in lines for _ in range(copies))


def test_headerless_no_mpi_paste_fails_as_measuring_nothing() -> None:
    run = parse_nccl_file(NO_MPI_PASTE, collective="all_reduce")[0]
    assert run.repeated_sizes == 2
    v = judge(run)
    assert v.status == "FAIL"
    assert any("measured nothing" in r for r in v.reasons)


def test_lone_processes_interleaved_fail() -> None:
    run_list = parse_nccl_output(_interleaved(ALLREDUCE_1GPU, 4), source="8proc.log")
    assert len(run_list) == 1
    run = run_list[0]
    assert run.separate_processes == 4 and run.nranks == 1
    assert run.repeated_sizes == 3 * 25
    v = judge(run, expected_ranks=4)
    assert v.status == "FAIL"
    assert any("4 processes each ran the test alone" in r for r in v.reasons)


def test_rank_count_must_match_the_launch() -> None:
    run = parse_nccl_file(SENDRECV)[0]
    assert judge(run, expected_ranks=2).status == "PASS"
    v = judge(run, expected_ranks=16)
    assert v.status == "FAIL"
    assert any("2 ranks (device lines), 16 launched" in r for r in v.reasons)


def test_device_lines_and_info_nranks_must_agree() -> None:
    text = SENDRECV.read_text().replace(
        "#  Rank  1 Group  0 Pid 4063850 on   lrdn2296 device  1 [0000:56:00] "
        "NVIDIA A100-SXM-64GB\n", "")
    run = parse_nccl_output(text, collective="sendrecv")[0]
    assert run.nranks == 1 and run.info_nranks == [2]
    v = judge(run)
    assert v.status == "FAIL"
    assert any("device lines list 1 ranks, NCCL INFO says nranks 2" in r for r in v.reasons)


def test_single_gpu_run_warns_that_it_measured_no_communication() -> None:
    v = judge(parse_nccl_file(ALLREDUCE_1GPU)[0])
    assert v.status == "WARN"
    assert any("busbw is 0 by definition" in r for r in v.reasons)
    v = judge(parse_nccl_file(ALLREDUCE_1GPU)[0], expected_ranks=8)
    assert v.status == "FAIL"


def test_real_multi_rank_logs_are_not_flagged() -> None:
    for path, coll in ((SENDRECV, None), (EFA_16, "all_reduce")):
        run = parse_nccl_file(path, collective=coll)[0]
        assert run.separate_processes == 1 and run.repeated_sizes == 0
        assert not [r for r in judge(run).reasons if "measured nothing" in r
                    or "disagrees" in r]


# --- 4. old builds' pre-scaled all_gather algbw ------------------------------------------

def test_old_allgather_convention_gives_one_note_not_warnings() -> None:
    run = parse_nccl_file(ALLGATHER_2019, nranks=8)[0]
    assert run.inconsistencies == []
    notes = [n for n in run.notes if "old nccl-tests convention" in n]
    assert len(notes) == 1
    v = judge(run)
    assert not any("figures disagree" in r for r in v.reasons)
    assert sum("old nccl-tests convention" in r for r in v.reasons) == 1


def test_old_convention_is_not_assumed_for_todays_figures() -> None:
    # today's all_gather on 2 ranks: algbw = size/time, busbw = algbw / 2; printed busbw
    # equal to algbw (a wrong factor) must still be flagged
    row = ("   1048576        131072     float    none      -1    20.00   52.43   52.43      0"
           "    20.00   52.43   52.43      0\n")
    head = ("#       size         count      type   redop    root     time   algbw   busbw "
            "#wrong     time   algbw   busbw #wrong\n")
    run = parse_nccl_output(head + row, collective="all_gather", nranks=2)[0]
    assert {i.check for i in run.inconsistencies} == {"busbw=algbw*factor"}


# --- 6. which algorithm ran ----------------------------------------------------------------

# INFO lines as NCCL prints them (NVIDIA/nccl issues 892, 1538, 1584)
ALGO_LIST = ("036260b61d3a:33347:33366 [6] NCCL INFO NCCL_ALGO set by environment to "
             "Tree,Ring,,CollnetDirect,CollnetChain,NVLS")
ZERO_NVLS = ("036260b61d3a:33347:33366 [6] NCCL INFO 16 coll channels, 0 nvls channels, "
             "16 p2p channels, 16 p2p channels per peer")
MULTICAST = ("job-3bb823c0-worker-0:5668:5722 [5] NCCL INFO NVLS multicast support is "
             "available on dev 5")
NO_MULTICAST = "algo-1:18062:18131 [5] NCCL INFO NVLS multicast support is not available on dev 5"


def _scan(*lines: str) -> AlgorithmScanner:
    s = AlgorithmScanner()
    for line in lines:
        s.feed(line)
    return s


@pytest.mark.parametrize(("value", "collective", "algo"), [
    ("Ring", "all_reduce", "Ring"), ("NVLSTree", "all_reduce", "NVLSTree"),
    ("nvls", "all_reduce", "NVLS"), ("Tree,Ring", "all_reduce", None),
    ("^NVLS", "all_reduce", None),
    ("reducescatter:nvls;allreduce:ring", "all_reduce", "Ring"),
    ("reducescatter:nvls;allreduce:ring", "all_gather", None)])
def test_nccl_algo_settings(value: str, collective: str, algo: str | None) -> None:
    assert algorithm_from_setting(value, collective) == algo


def test_algorithm_from_info_lines() -> None:
    assert _scan(ALGO_LIST).result("all_reduce", 1)[0] is None
    assert _scan(MULTICAST, "x NCCL INFO 24 coll channels, 24 collnet channels, 16 nvls "
                 "channels, 32 p2p channels").result("all_reduce", 1)[0] == "NVLS"
    assert _scan(NO_MULTICAST).result("all_reduce", 1)[0] == "Ring"
    assert _scan(MULTICAST, ZERO_NVLS).result("all_reduce", 1)[0] == "Ring"
    assert _scan(MULTICAST, ZERO_NVLS).result("all_reduce", 2) == (None, None)
    assert _scan("NCCL_ALGO=NVLS ./build/all_reduce_perf -b 256M -e 2G -f 2 -g 8"
                 ).result("all_reduce", 1)[0] == "NVLS"


def test_algorithm_lands_in_the_parsed_run_and_record_block() -> None:
    marker = "lrdn2296:4063850:4063871 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to NVL\n"
    text = SENDRECV.read_text().replace(
        marker, marker + "lrdn2296:4063850:4063871 [0] NCCL INFO NCCL_ALGO set by environment"
        " to Ring\n")
    run = parse_nccl_output(text)[0]
    assert run.algorithm == "Ring" and "NCCL_ALGO=Ring" in (run.algorithm_source or "")
    assert any(r.startswith("note: NCCL algorithm Ring (NCCL_ALGO=Ring") for r in
               judge(run).reasons)
    block = run.to_block()
    assert block["algorithm"] == "Ring"
    assert CollectiveRun.from_block(block).algorithm == "Ring"
    assert parse_nccl_file(SENDRECV)[0].algorithm is None


def test_algorithm_from_the_environment_of_a_json_file() -> None:
    from toolkit.bench.nccl.parse_json import parse_nccl_json

    doc = {"args": ["./build/all_reduce_perf", "-b", "8", "-J", "out.json"],
           "env": ["FI_PROVIDER=efa", "NCCL_ALGO=Ring"], "nccl_version": 22703,
           "config": {"nthreads": 1, "ngpus": 8, "devices": [
               {"rank": 0, "group": 0, "pid": 1, "hostname": "a", "device": 0}]},
           "results": [], "average_bus_bandwidth": {"bandwidth": 0, "okay": "unchecked"}}
    run = parse_nccl_json(json.dumps(doc), source="out.json")
    assert (run.collective, run.algorithm) == ("all_reduce", "Ring")
