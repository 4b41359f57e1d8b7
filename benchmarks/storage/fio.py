"""Write fio job files, run fio with JSON output, and read the figures the benchmark needs.

fio (https://fio.readthedocs.io) does the I/O; this module only describes the jobs and
parses fio's ``--output-format=json+`` report (``json`` plus each latency histogram's
non-empty bins). With ``group_reporting`` fio merges a node's jobs into one entry: bytes
summed, runtime the longest job's, latency percentiles from the merged histogram. The bins
let the driver merge the nodes' histograms the same way (:func:`percentile_of_bins`).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BLOCK_SEQ = "1M"
BLOCK_RAND = "4k"


@dataclass(frozen=True)
class FioJob:
    """One fio run on one node: ``numjobs`` processes, one file each, in ``directory``."""

    name: str  # fio job name; files are NAME.JOBNUM.0, so a read finds what a write left
    rw: str  # write, read, randread
    directory: Path
    size_mib: int
    numjobs: int
    block: str = BLOCK_SEQ
    direct: bool = True
    end_fsync: bool = False
    runtime_s: int = 0  # > 0: time-based, loops over the files for this long
    # shared-file variant: every job of every node in one file, job k of this node at
    # (first_slot + k) x size, so the regions tile the file without overlapping
    shared_file: str | None = None
    first_slot: int = 0

    def text(self) -> str:
        lines = ["[global]", f"directory={self.directory}", "ioengine=psync",
                 f"direct={int(self.direct)}", f"bs={self.block}", f"size={self.size_mib}M",
                 f"numjobs={self.numjobs}", "group_reporting=1", "invalidate=1"]
        if self.end_fsync:
            lines.append("end_fsync=1")
        if self.runtime_s > 0:
            lines += ["time_based=1", f"runtime={self.runtime_s}"]
        if self.shared_file:
            lines += [f"filename={self.shared_file}",
                      f"offset={self.first_slot * self.size_mib}M",
                      f"offset_increment={self.size_mib}M"]
        lines += ["", f"[{self.name}]", f"rw={self.rw}"]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class FioResult:
    """One group-reported fio entry, in bytes, milliseconds and microseconds."""

    version: str
    direction: str  # "read" or "write"
    io_bytes: int
    runtime_ms: int
    iops: float
    total_ios: int
    lat_p50_us: float | None
    lat_p99_us: float | None
    error: int
    # completion latency histogram: (bin value in ns, I/Os), ascending; None from a plain
    # ``json`` report
    clat_bins_ns: tuple[tuple[int, int], ...] | None = None


class FioError(RuntimeError):
    """fio failed or wrote no usable report."""


def _json_part(text: str) -> Any:
    # fio may print warnings ahead of the report on the same stream
    start = text.find("{")
    if start < 0:
        raise FioError("fio wrote no JSON report")
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError as exc:
        raise FioError(f"fio's JSON report does not parse ({exc.msg})") from None


def _percentile(clat: dict[str, Any], which: str) -> float | None:
    table = clat.get("percentile") or {}
    for key, value in table.items():
        if float(key) == float(which):
            return float(value) / 1000.0
    return None


def _bins(clat: dict[str, Any]) -> tuple[tuple[int, int], ...] | None:
    bins = clat.get("bins")
    if not isinstance(bins, dict):
        return None
    return tuple(sorted((int(value), int(count)) for value, count in bins.items()))


def percentile_of_bins(bins: Iterable[tuple[int, int]], pct: float) -> int | None:
    """fio's own rule (stat.c, calc_clat_percentiles): the value of the first bin, in
    ascending order, where the running count reaches pct/100 of all I/Os. Applied to one
    node's bins it gives the percentile fio printed; to the sum of several nodes' bins, the
    percentile over all of their I/Os."""
    ordered = sorted(bins)
    total = sum(count for _value, count in ordered)
    if total <= 0:
        return None
    running = 0
    for value, count in ordered:
        running += count
        if running >= pct / 100.0 * total:
            return value
    return ordered[-1][0]


def parse_report(text: str, direction: str) -> FioResult:
    """The merged entry of a ``group_reporting`` run; ``direction`` picks read or write."""
    data = _json_part(text)
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not jobs:
        raise FioError("fio's report lists no jobs")
    if len(jobs) != 1:
        raise FioError(f"expected one group-reported job, found {len(jobs)}")
    job = jobs[0]
    side = job.get(direction)
    if not isinstance(side, dict):
        raise FioError(f"fio's report has no {direction!r} section")
    clat = side.get("clat_ns") or {}
    return FioResult(
        version=str(data.get("fio version", "")),
        direction=direction,
        io_bytes=int(side["io_bytes"]),
        runtime_ms=int(side["runtime"]),
        iops=float(side["iops"]),
        total_ios=int(side["total_ios"]),
        lat_p50_us=_percentile(clat, "50"),
        lat_p99_us=_percentile(clat, "99"),
        error=int(job.get("error", 0)),
        clat_bins_ns=_bins(clat),
    )


def direction_of(rw: str) -> str:
    return "write" if "write" in rw else "read"


def run(job_file: Path, report: Path, *, procs: list[subprocess.Popen[bytes]] | None = None,
        fio: str = "fio") -> FioResult:
    """Run ``fio`` on a job file, keep its JSON report at ``report``, parse it.

    ``procs`` receives the running process so a signal handler can stop it by pid.
    """
    cmd = [fio, "--output-format=json+", f"--output={report}", str(job_file)]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise FioError(f"{fio} not found (install the fio package)") from None
    if procs is not None:
        procs.append(proc)
    _, err = proc.communicate()
    if procs is not None:
        procs.remove(proc)
    if proc.returncode != 0:
        last = err.decode(errors="replace").strip().splitlines()
        raise FioError(f"fio exited {proc.returncode}: {last[-1] if last else 'no message'}")
    rw = ""
    for line in job_file.read_text().splitlines():
        if line.startswith("rw="):
            rw = line.split("=", 1)[1]
    result = parse_report(report.read_text(errors="replace"), direction_of(rw))
    if result.error:
        raise FioError(f"fio reported error {result.error} for {job_file.name}")
    return result
