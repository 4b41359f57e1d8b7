"""Generated tables in every column set, printed the way nccl-tests prints them, read back."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.bench.nccl import parse_nccl_output
from toolkit.bench.nccl.parse_json import parse_nccl_json

FORMATS = ("new", "old", "oldest")
PREFIXES = ("", "[1,0]<stdout>:", "0: ")


def float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: fewer decimals as the value grows, %e past the width."""
    power, v = 0, 1
    while value >= v:
        power, v = power + 1, v * 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}"


measurement = st.fixed_dictionaries({
    "time": st.floats(0.01, 5e6), "algbw": st.floats(0, 2e6), "busbw": st.floats(0, 2e6),
    "wrong": st.one_of(st.just("N/A"), st.integers(0, 1000)),
    "error": st.sampled_from([0.0, 6e-08, 5e-07, 1.0])})
row = st.fixed_dictionaries({"size": st.integers(1, 1 << 36), "count": st.integers(0, 1 << 34),
                             "type": st.sampled_from(["float", "half", "bfloat16", "int8"]),
                             "redop": st.sampled_from(["sum", "prod", "max", "none"]),
                             "root": st.sampled_from([-1, 0, 3]),
                             "oop": measurement, "ip": measurement})


def render(rows: list[dict], fmt: str, prefix: str, noise: bool) -> tuple[str, list[list]]:
    """The log text and, per row, the printed cells the parser must return."""
    keys = {"new": ["size", "count", "type", "redop", "root"], "old":
            ["size", "count", "type", "redop"], "oldest": ["size", "count", "type"]}[fmt]
    err = "#wrong" if fmt == "new" else "error"
    hash_ = "# " if fmt != "oldest" else " "
    lines = [f"{hash_}nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor)",
             f"{hash_}" + "  ".join(keys + ["time", "algbw", "busbw", err] * 2),
             f"{hash_}(B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)"]
    expect = []
    for r in rows:
        cells = [f"{r['size']:12d}", f"{r['count']:12d}", f"{r['type']:>8}"]
        if fmt != "oldest":
            cells.append(f"{r['redop']:>6}")
        if fmt == "new":
            cells.append(f"{r['root']:6d}")
        printed = []
        for m in (r["oop"], r["ip"]):
            w = (str(m["wrong"]) if fmt == "new" else f"{m['error']:.0e}")
            part = [float_str(m["time"], 7), f"{m['algbw']:6.2f}", f"{m['busbw']:6.2f}",
                    f"{w:>6}"]
            cells += part
            printed.append(part)
        lines.append("  ".join(cells))
        if noise:
            lines.append("host:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC")
        expect.append(printed)
    lines += [f"{hash_}Out of bounds values : 0 OK", f"{hash_}Avg bus bandwidth    : 1.5 "]
    return "\n".join(prefix + ln for ln in lines) + "\n", expect


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(row, min_size=1, max_size=6), fmt=st.sampled_from(FORMATS),
       prefix=st.sampled_from(PREFIXES), noise=st.booleans())
def test_printed_table_reads_back(rows: list[dict], fmt: str, prefix: str, noise: bool) -> None:
    text, printed = render(rows, fmt, prefix, noise)
    (run,) = parse_nccl_output(text, collective="all_reduce")
    assert run.format == fmt and run.complete and run.avg_busbw_gbps == 1.5
    assert len(run.rows) == len(rows)
    for got, want, cells in zip(run.rows, rows, printed, strict=True):
        assert (got.size_bytes, got.count, got.dtype) == (want["size"], want["count"],
                                                          want["type"])
        assert got.redop == (None if fmt == "oldest" else want["redop"])
        assert got.root == (want["root"] if fmt == "new" else None)
        for m, c in zip((got.out_of_place, got.in_place), cells, strict=True):
            assert m is not None
            assert (m.time_us, m.algbw_gbps, m.busbw_gbps) == tuple(float(x) for x in c[:3])
            if fmt == "new":
                assert m.wrong == (None if c[3].strip() == "N/A" else int(c[3]))
                assert m.error is None
            else:
                assert m.error == float(c[3]) and m.wrong is None


def json_doc(rows: list[dict], complete: bool) -> str:
    results = [{"size": r["size"], "count": r["count"], "type": r["type"],
                "redop": r["redop"], "root": f"{r['root']:6d}",
                "out_of_place": {"time": r["oop"]["time"], "alg_bw": r["oop"]["algbw"],
                                 "bus_bw": r["oop"]["busbw"],
                                 "nwrong": None if r["oop"]["wrong"] == "N/A"
                                 else float(r["oop"]["wrong"])},
                "in_place": {"time": r["ip"]["time"], "alg_bw": r["ip"]["algbw"],
                             "bus_bw": r["ip"]["busbw"], "nwrong": 0.0},
                "actual_iterations": 20, "experiment_name": ""} for r in rows]
    doc = {"version": 3, "start_time": "2025-11-01 10:00:00",
           "args": ["/opt/nccl-tests/build/all_gather_perf", "-b", "8", "-J", "out.json"],
           "env": ["FI_PROVIDER=efa"], "nccl_version": 22703,
           "config": {"nthreads": 1, "ngpus": 2, "minimum_bytes": 8, "maximum_bytes": 1024,
                      "devices": [{"rank": 0, "group": 0, "pid": 1, "hostname": "a",
                                   "device": 0, "device_hex": "0000:1d:00",
                                   "device_info": "NVIDIA H100"},
                                  {"rank": 2, "group": 0, "pid": 7, "hostname": "b",
                                   "device": 0, "device_hex": "0000:1d:00",
                                   "device_info": "NVIDIA H100"}]},
           "results": results,
           "out_of_bounds": {"count": 0, "okay": "true"},
           "average_bus_bandwidth": {"bandwidth": 1.25, "okay": "unchecked"},
           "errors": [], "end_time": "2025-11-01 10:01:00"}
    text = json.dumps(doc)
    if not complete:  # streamed file of a run that died after its second result
        cut = text.index('"out_of_bounds"')
        text = text[:cut]
        if len(rows) > 1:
            second_end = text.index('"experiment_name": ""}', text.index('"results"'))
            second_end = text.index('"experiment_name": ""}', second_end + 1)
            text = text[:second_end + len('"experiment_name": ""}')] + ',{"size": 12'
    return text


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(row, min_size=1, max_size=5), complete=st.booleans())
def test_json_output_reads_back(rows: list[dict], complete: bool) -> None:
    run = parse_nccl_json(json_doc(rows, complete), source="out.json")
    assert run.collective == "all_gather" and run.collective_source == "args in JSON"
    assert run.nranks == 4 and run.hosts == ["a", "b"] and run.nccl_version == "2.27.3"
    assert run.complete == complete
    kept = rows if complete else rows[:2]
    assert len(run.rows) == len(kept)
    for got, want in zip(run.rows, kept, strict=True):
        assert got.size_bytes == want["size"] and got.root == want["root"]
        assert got.out_of_place is not None
        assert got.out_of_place.busbw_gbps == want["oop"]["busbw"]
        assert got.out_of_place.wrong == (None if want["oop"]["wrong"] == "N/A"
                                          else want["oop"]["wrong"])
    if complete:
        assert run.out_of_bounds == {"count": 0, "status": "OK"}
        assert run.avg_busbw_gbps == 1.25
    else:
        assert run.failure_lines and run.out_of_bounds is None
