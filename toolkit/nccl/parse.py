"""Read nccl-tests output as printed: every column set since 2017, launcher prefixes, noise.

Formats handled (all seen in published logs):

- new: ``size count type redop root | time algbw busbw #wrong | ...`` (``#wrong`` may be
  ``N/A``); newer builds add per-iteration columns (``i_min i_max i_p99 i_cv%``) or a
  timestamp, which are skipped;
- old: ``size count type redop | time algbw busbw error | ...`` (float max error);
- oldest: ``size count type | time algbw busbw error | ...`` with no ``#`` before the header
  and footer lines;
- lines prefixed by ``mpirun --tag-output`` (``[1,0]<stdout>:``) or ``srun --label``
  (``0: ``), with NCCL INFO/WARN lines anywhere, also between data rows;
- a run that stopped before its footer: returned with ``complete=False``, the rows it got
  and the lines that say why.

The JSON file of ``-J/--output_file`` (nccl-tests >= 2.18.5) is read by :mod:`.parse_json`.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.collectives import COLLECTIVES, canonical_collective
from toolkit.errors import PctkError
from toolkit.nccl.check import check_consistency
from toolkit.nccl.model import CollectiveRun, Device, Measurement, Row
from toolkit.nccl.network import detect_network

_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\s*\d+:\s?)")
_RANK = re.compile(r"^Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+"
                   r"device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$")
_NTHREAD = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_TESTS_VERSION = re.compile(r"nccl-tests version (\S+)")
_NCCL_VERSION = re.compile(r"NCCL version (\S+)")
_OOB = re.compile(r"^Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_AVG = re.compile(r"^Avg bus bandwidth\s*:\s*(\S+)")
_NRANKS_INFO = re.compile(r"NCCL INFO .*\bn[Rr]anks (\d+)")
_COMMAND = re.compile(r"(?:^|[\s/=])([a-z_]+)_perf(?:_mpi)?\b")
_FAILURE = re.compile(
    r"Test NCCL failure|Test failure|Cuda failure|CUDA failure|NCCL failure|"
    r"srun: error|slurmstepd: error|Segmentation fault|Bus error|Aborted|Killed|"
    r"terminate called|mpirun noticed|MPI_ABORT|exited on signal|Invalid number of GPUs|"
    r"out of memory|Traceback|^pctk: ", re.IGNORECASE)
_TIME_COLS = ("time", "cputime")
_KEY_COLS = ("size", "count", "type", "redop", "root")
MAX_FAILURE_LINES = 30


def strip_prefix(line: str) -> str:
    """Drop an ``[1,0]<stdout>:`` or ``0: `` launcher label."""
    return _PREFIX.sub("", line, count=1)


def collective_from_name(name: str) -> str | None:
    """``...-allreduce-srun.log`` -> all_reduce; None when the name says nothing."""
    squashed = re.sub(r"[^a-z]", "", Path(name).name.lower())
    ordered = sorted(COLLECTIVES, key=len, reverse=True)
    for c in ordered:
        if c.replace("_", "") in squashed and c not in ("gather", "scatter", "reduce"):
            return c
    return None


class _Columns:
    """Where each figure sits in a data row, from the header's tokens."""

    def __init__(self, tokens: list[str]):
        starts = [i for i, t in enumerate(tokens) if t in _TIME_COLS]
        self.keys = tokens[:starts[0]] if starts else tokens
        self.groups: list[dict[str, int]] = []
        for n, s in enumerate(starts[:2]):
            end = starts[n + 1] if n + 1 < len(starts) else len(tokens)
            self.groups.append({("wrong" if t in ("#wrong", "error") else
                                 "time" if t in _TIME_COLS else t): i
                                for i, t in enumerate(tokens[s:end], start=s)})
        self.error_kind = "error" if "error" in tokens else "#wrong"
        self.width = max([i for g in self.groups for i in g.values()], default=len(tokens) - 1) + 1
        if "root" in self.keys:
            self.format = "new"
        elif "redop" in self.keys:
            self.format = "old"
        else:
            self.format = "oldest"

    def measurement(self, tokens: list[str], group: int) -> Measurement | None:
        if group >= len(self.groups):
            return None
        g = self.groups[group]
        text = {k: tokens[i] for k, i in g.items() if k in ("time", "algbw", "busbw", "wrong")}
        wrong: int | None = None
        error: float | None = None
        w = text.get("wrong", "N/A")
        if w != "N/A":
            if self.error_kind == "error":
                error = float(w)
            else:
                wrong = int(float(w))
        return Measurement(float(text["time"]), float(text["algbw"]), float(text["busbw"]),
                           wrong, error, text)

    def row(self, tokens: list[str]) -> Row | None:
        if len(tokens) < self.width or not (tokens[0].isdigit() and tokens[1].isdigit()):
            return None
        k = {name: tokens[i] for i, name in enumerate(self.keys)}
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k.get("type", "")):
            return None
        try:
            oop, ip = self.measurement(tokens, 0), self.measurement(tokens, 1)
        except (ValueError, KeyError):
            return None
        root = k.get("root")
        return Row(int(k["size"]), int(k["count"]), k["type"], k.get("redop"),
                   int(root) if root and root.lstrip("-").isdigit() else None, oop, ip)


def _header_tokens(body: str) -> list[str] | None:
    tokens = body.split()
    return tokens if tokens[:3] == ["size", "count", "type"] else None


def _uniform(values: list[str | None]) -> str | None:
    distinct = list(dict.fromkeys(v for v in values if v is not None))
    return ",".join(distinct) if distinct else None


def _finish(run: CollectiveRun, lines: list[str], after_table: list[str],
            collective: str | None, source: str | None, nranks: int | None) -> CollectiveRun:
    if collective:
        run.collective, run.collective_source = canonical_collective(collective), "given"
    elif run.collective is None and source:
        run.collective = collective_from_name(source)
        run.collective_source = "file name" if run.collective else None
    run.source = source
    run.network = detect_network(lines)
    if nranks:
        run.nranks, run.nranks_source = nranks, "given"
    elif run.devices:
        run.nranks, run.nranks_source = len({d.rank for d in run.devices}), "device lines"
    else:
        counts = [int(m.group(1)) for ln in lines if (m := _NRANKS_INFO.search(ln))]
        if counts:
            run.nranks, run.nranks_source = max(counts), "NCCL INFO lines"
    if not run.rows and run.format:
        run.notes.append(f"column header in {run.format} format, but no data rows")
        run.format = None
    run.dtype = _uniform([r.dtype for r in run.rows])
    run.redop = _uniform([r.redop for r in run.rows])
    failures = [ln for ln in lines if _FAILURE.search(ln)]
    if not run.complete:
        failures = [ln for ln in after_table if "NCCL WARN" in ln or _FAILURE.search(ln)]
        if not run.rows and not failures:
            failures = [ln for ln in lines if "NCCL WARN" in ln]
    run.failure_lines = list(dict.fromkeys(ln.strip() for ln in failures))[:MAX_FAILURE_LINES]
    run.inconsistencies, notes = check_consistency(run)
    run.notes.extend(notes)
    return run


def parse_nccl_output(text: str, *, collective: str | None = None, source: str | None = None,
                      nranks: int | None = None) -> list[CollectiveRun]:
    """Every table in a nccl-tests log, in order; raises PctkError if there is none."""
    runs: list[CollectiveRun] = []
    run = CollectiveRun(None)
    cols: _Columns | None = None
    seg: list[str] = []          # this run's lines, prefixes stripped
    after: list[str] = []        # lines since the last data row or the header
    evidence = False
    for raw in text.splitlines():
        line = strip_prefix(raw.rstrip("\r\n"))
        body = line.strip().lstrip("#").strip()
        header = _header_tokens(body)
        new_context = header or _NTHREAD.search(body) or _STARTING.search(body)
        if run.complete and new_context:
            runs.append(_finish(run, seg, after, collective, source, nranks))
            run, cols, seg, after = CollectiveRun(None), None, [], []
        seg.append(line)
        if header:
            cols, evidence, after = _Columns(header), True, []
            run.format = cols.format
            continue
        if cols is not None and not line.lstrip().startswith("#"):
            row = cols.row(line.split())
            if row is not None:
                run.rows.append(row)
                after = []
                continue
        after.append(line)
        if m := _RANK.match(body):
            rank, group, pid, host, dev, bus, name = m.groups()
            run.devices.append(Device(int(rank), host, int(dev), bus, name,
                                      int(group) if group else None, int(pid)))
            evidence = True
        elif m := _OOB.match(body):
            run.out_of_bounds = {"count": int(m.group(1)), "status": m.group(2)}
        elif m := _AVG.match(body):
            run.avg_busbw_gbps = float(m.group(1))
            run.complete = True
        elif m := _STARTING.search(body):
            run.collective = canonical_collective(m.group(1))
            run.collective_source = "log header"
        elif m := _TESTS_VERSION.search(body):
            run.notes.append(f"nccl-tests {m.group(1)}")
        elif "NCCL INFO" not in line and "NCCL WARN" not in line and \
                run.collective is None and (m := _COMMAND.search(line)):
            try:
                run.collective = canonical_collective(m.group(1))
                run.collective_source = "command line in log"
            except ValueError:
                pass
        if run.nccl_version is None and (m := _NCCL_VERSION.search(line)):
            run.nccl_version = m.group(1)
        if "NCCL WARN" in line:
            run.warn_lines.append(line.strip())
        evidence = evidence or bool(_NTHREAD.search(body) or _FAILURE.search(line))
    if not evidence:
        where = f" in {source}" if source else ""
        raise PctkError(f"no nccl-tests output found{where} (no 'size count type' header, "
                        "no device lines, no failure lines)",
                        "pass the stdout of an nccl-tests binary (all_reduce_perf, ...)")
    runs.append(_finish(run, seg, after, collective, source, nranks))
    return runs


def parse_nccl_file(path: str | Path, *, collective: str | None = None,
                    nranks: int | None = None) -> list[CollectiveRun]:
    """Parse a text log or a ``-J`` JSON file (told apart by the first character)."""
    p = Path(path)
    try:
        text = p.read_text(errors="replace")
    except OSError as exc:
        raise PctkError(f"cannot read {p}: {exc.strerror}", "check the path") from None
    if text.lstrip().startswith("{"):
        from toolkit.nccl.parse_json import parse_nccl_json

        return [parse_nccl_json(text, collective=collective, source=str(p), nranks=nranks)]
    return parse_nccl_output(text, collective=collective, source=str(p), nranks=nranks)
