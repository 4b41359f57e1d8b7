"""Read the JSON file nccl-tests writes with ``-J/--output_file <file>.json`` (>= v2.18.5).

Layout, from nccl-tests ``src/util.cu`` (JSON_FILE_VERSION 3; earlier builds lack
``version`` and spell ``average_bus_bandwidith``)::

    {"version": 3, "start_time": "...", "args": ["./all_reduce_perf", "-b", ...],
     "env": [...], "nccl_version": 22703,
     "config": {"nthreads", "ngpus", "minimum_bytes", "maximum_bytes", ...,
                "devices": [{"rank", "group", "pid", "hostname", "device", "device_hex",
                             "device_info"}]},          # one entry per process
     "results": [{"size", "count", "type", "redop", "root": "    -1",
                  "out_of_place": {"time" | "cpu_time", "alg_bw", "bus_bw", "nwrong"} | null,
                  "in_place": {...}, "actual_iterations", "experiment_name"}],
     "out_of_bounds": {"count", "okay"},
     "average_bus_bandwidth": {"bandwidth", "okay"},
     "errors": [...], "end_time": "..."}

The file is streamed as the run goes, so a crashed run leaves it unterminated: the complete
result objects are still read one by one and the run is reported as incomplete.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import PurePath
from typing import Any

from benchmarks.vocab import canonical_collective
from toolkit.bench.comm.algorithm import AlgorithmScanner
from toolkit.bench.comm.check import check_consistency
from toolkit.bench.comm.model import CollectiveRun, Device, Measurement, Row
from toolkit.bench.comm.network import detect_network
from toolkit.errors import PctkError


def _num(v: Any) -> float:
    return float("nan") if v in ("nan", None) else float(v)


def _measurement(d: dict[str, Any] | None) -> Measurement | None:
    if not d:
        return None
    wrong = d.get("nwrong")
    t = d.get("time", d.get("cpu_time"))
    return Measurement(_num(t), _num(d.get("alg_bw")), _num(d.get("bus_bw")),
                       None if wrong is None else int(float(wrong)), None)


def _salvage(text: str) -> dict[str, Any]:
    """The parts of an unterminated document: its header values and complete results."""
    dec = json.JSONDecoder()
    doc: dict[str, Any] = {}
    for key in ("args", "nccl_version", "config"):
        m = re.search(rf'"{key}"\s*:\s*', text)
        if m:
            with contextlib.suppress(json.JSONDecodeError):
                doc[key] = dec.raw_decode(text, m.end())[0]
    m = re.search(r'"results"\s*:\s*\[', text)
    results: list[Any] = []
    pos = m.end() if m else len(text)
    while m:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        try:
            obj, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        results.append(obj)
    doc["results"] = results
    return doc


def parse_nccl_json(text: str, *, collective: str | None = None, source: str | None = None,
                    nranks: int | None = None) -> CollectiveRun:
    try:
        doc = json.loads(text)
        complete = "average_bus_bandwidth" in doc or "average_bus_bandwidith" in doc
    except json.JSONDecodeError:
        doc, complete = _salvage(text), False
    if not isinstance(doc, dict) or ("results" not in doc and "config" not in doc):
        raise PctkError(f"{source or 'input'} is JSON but not an nccl-tests -J file",
                        "pass the file written by all_reduce_perf -J out.json")
    run = CollectiveRun(None, format="json", complete=complete, source=source)
    args = doc.get("args") or []
    if collective:
        run.collective, run.collective_source = canonical_collective(collective), "given"
    elif args:
        try:
            run.collective = canonical_collective(PurePath(str(args[0])).name)
            run.collective_source = "args in JSON"
        except ValueError:
            pass
    cfg = doc.get("config") or {}
    for d in cfg.get("devices") or []:
        run.devices.append(Device(int(d.get("rank", 0)), str(d.get("hostname", "?")),
                                  d.get("device"), d.get("device_hex"),
                                  str(d.get("device_info", "")), d.get("group"), d.get("pid")))
    per_proc = int(cfg.get("nthreads") or 1) * int(cfg.get("ngpus") or 1)
    if nranks:
        run.nranks, run.nranks_source = nranks, "given"
    elif run.devices:
        # one device entry per process; each process drives nthreads x ngpus ranks
        run.nranks, run.nranks_source = len(run.devices) * per_proc, "JSON config"
    if doc.get("nccl_version"):
        code = int(doc["nccl_version"])
        run.nccl_version = (f"{code // 10000}.{code // 100 % 100}.{code % 100}"
                            if code >= 10000 else f"{code // 1000}.{code // 100 % 10}."
                            f"{code % 100}")
    for r in doc.get("results") or []:
        root = str(r.get("root", "")).strip()
        run.rows.append(Row(int(r["size"]), int(r["count"]), str(r.get("type")), r.get("redop"),
                            int(root) if root.lstrip("-").isdigit() else None,
                            _measurement(r.get("out_of_place")), _measurement(r.get("in_place"))))
    oob = doc.get("out_of_bounds")
    if oob:
        run.out_of_bounds = {"count": int(oob.get("count", 0)),
                             "status": "OK" if oob.get("okay") in (True, "true") else "FAILED"}
    avg = doc.get("average_bus_bandwidth") or doc.get("average_bus_bandwidith") or {}
    bw = avg.get("bandwidth", avg.get("bandwidith"))
    run.avg_busbw_gbps = None if bw is None else _num(bw)
    run.dtype = ",".join(dict.fromkeys(r.dtype for r in run.rows)) or None
    run.redop = ",".join(dict.fromkeys(r.redop for r in run.rows if r.redop)) or None
    run.failure_lines = [str(e) for e in doc.get("errors") or [] if e]
    if not complete:
        run.failure_lines.append("JSON output ends before the footer: the run did not finish")
    env = [str(e) for e in doc.get("env") or []]
    run.network = detect_network(env)  # env holds no NCCL lines: stays 'unknown' unless told
    algo = AlgorithmScanner()
    for entry in env:
        algo.feed(entry)
    run.algorithm, run.algorithm_source = algo.result(run.collective, len(run.hosts) or None)
    run.inconsistencies, notes = check_consistency(run)
    run.notes.extend(notes)
    run.notes.append("network path not in JSON output; parse the stdout log to verify EFA")
    return run
