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

import itertools
import re
from collections.abc import Iterable
from pathlib import Path

from benchmarks.nccltable import Columns, header_tokens, infer_columns
from benchmarks.vocab import COLLECTIVES, canonical_collective
from toolkit.bench.comm.algorithm import AlgorithmScanner
from toolkit.bench.comm.check import check_consistency
from toolkit.bench.comm.model import CollectiveRun, Device
from toolkit.bench.comm.network import NetworkScanner
from toolkit.bench.nccl.parse_json import parse_nccl_json
from toolkit.errors import PctkError
from toolkit.fsutil import DEFAULT_MAX_READ_BYTES, InputTooLarge, NotRegularFile, open_regular_text

_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\s*\d+:\s?)")
_RANK = re.compile(r"^Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+"
                   r"device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$")
_NTHREAD = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_TESTS_VERSION = re.compile(r"nccl-tests version (\S+)")
_NCCL_VERSION = re.compile(r"NCCL version (\S+)")
_OOB = re.compile(r"^Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_AVG = re.compile(r"^Avg bus bandwidth\s*:\s*(\S+)")
_CUDA_DRIVER = re.compile(r"NCCL INFO cudaDriverVersion (\d+)")
_NRANKS_INFO = re.compile(r"\bn[Rr]anks (\d+)")
_COMMAND = re.compile(r"(?:^|[\s/=])([a-z_]+)_perf(?:_mpi)?\b")
_FAILURE = re.compile(
    r"Test NCCL failure|Test failure|Cuda failure|CUDA failure|NCCL failure|"
    r"srun: error|slurmstepd: error|Segmentation fault|Bus error|Aborted|Killed|"
    r"terminate called|mpirun noticed|MPI_ABORT|exited on signal|Invalid number of GPUs|"
    r"out of memory|Traceback|^pctk: ", re.IGNORECASE)
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


def _uniform(values: list[str | None]) -> str | None:
    distinct = list(dict.fromkeys(v for v in values if v is not None))
    return ",".join(distinct) if distinct else None


class _Bounded:
    """An ordered, de-duplicated list of lines that stops growing at ``limit``."""

    def __init__(self, limit: int = MAX_FAILURE_LINES):
        self.items: dict[str, None] = {}
        self.limit = limit
        self.dropped = 0

    def add(self, line: str) -> None:
        line = line.strip()
        if line in self.items:
            return
        if len(self.items) < self.limit:
            self.items[line] = None
        else:
            self.dropped += 1

    def clear(self) -> None:
        self.items.clear()

    def lines(self) -> list[str]:
        return list(self.items)


class _RunReader:
    """Reads the lines of one run (one table) as they come; keeps bounded state only."""

    def __init__(self) -> None:
        self.run = CollectiveRun(None)
        self.cols: Columns | None = None
        self.evidence = False
        self.net = NetworkScanner()
        self.algo = AlgorithmScanner()
        self.failures = _Bounded()        # failure lines anywhere in the run
        self.after = _Bounded()           # failure/WARN lines since the last row
        self.warn = _Bounded(200)
        self.preambles = 0                # '# nThread ...' lines (one per process)
        self.footers = 0
        self.rank_counts: dict[int, int] = {}     # device lines per rank number
        self.seen_sizes: set[tuple[int, str, str | None, int | None]] = set()
        self.last_size = -1
        self.out_of_order = 0
        self.headerless = False

    @property
    def has_table(self) -> bool:
        return self.cols is not None or bool(self.run.rows)

    @property
    def unfinished(self) -> bool:
        """Past its header (or already failing), no footer yet: another run's preamble
        here means this one stopped early."""
        return not self.run.complete and (self.has_table or bool(self.failures.items))

    @property
    def interleaved(self) -> bool:
        return self.preambles > 1 or any(n > 1 for n in self.rank_counts.values())

    def feed(self, line: str) -> None:
        body = line.strip().lstrip("#").strip()
        if "NCCL INFO" in line:
            self._info(line)
            return
        self.algo.feed(line)
        header = header_tokens(body)
        if header:
            self.cols, self.evidence = Columns(header), True
            self.run.format = self.cols.format
            self.after.clear()
            return
        if not line.lstrip().startswith("#") and self._row(line.split()):
            return
        if "NCCL WARN" in line:
            self.warn.add(line)
            self.after.add(line)
        failure = bool(_FAILURE.search(line))
        if failure:
            self.failures.add(line)
            self.after.add(line)
            self.evidence = True
        self._context(line, body)

    def _info(self, line: str) -> None:
        # most of a debug log is INFO lines: cheap substring tests before any regex
        self.net.feed(line)
        self.algo.feed(line)
        run = self.run
        if "anks " in line and (m := _NRANKS_INFO.search(line)) and \
                int(m.group(1)) not in run.info_nranks:
            run.info_nranks.append(int(m.group(1)))
        if run.nccl_version is None and "version" in line and \
                (m := _NCCL_VERSION.search(line)):
            run.nccl_version = m.group(1)
        if run.cuda_driver is None and "cudaDriverVersion" in line and \
                (m := _CUDA_DRIVER.search(line)):
            code = int(m.group(1))
            run.cuda_driver = f"{code // 1000}.{code % 1000 // 10}"
        if "NCCL_TESTS_SPLIT" in line:
            run.notes.append("NCCL_TESTS_SPLIT set: ranks are split into several communicators")

    def _row(self, tokens: list[str]) -> bool:
        cols = self.cols
        if cols is None:
            cols = infer_columns(tokens)
            if cols is None:
                return False
            self.cols, self.headerless, self.evidence = cols, True, True
            self.run.format = cols.format
        row = cols.row(tokens)
        if row is None:
            return False
        key = (row.size_bytes, row.dtype, row.redop, row.root)
        if key in self.seen_sizes:
            self.run.repeated_sizes += 1
        self.seen_sizes.add(key)
        if row.size_bytes < self.last_size:
            self.out_of_order += 1
        self.last_size = row.size_bytes
        self.run.rows.append(row)
        self.after.clear()
        return True

    def _context(self, line: str, body: str) -> None:
        run = self.run
        if m := _RANK.match(body):
            rank, group, pid, host, dev, bus, name = m.groups()
            self.rank_counts[int(rank)] = self.rank_counts.get(int(rank), 0) + 1
            run.devices.append(Device(int(rank), host, int(dev), bus, name,
                                      int(group) if group else None, int(pid)))
            self.evidence = True
        elif m := _OOB.match(body):
            run.out_of_bounds = {"count": int(m.group(1)), "status": m.group(2)}
        elif m := _AVG.match(body):
            run.avg_busbw_gbps = float(m.group(1))
            run.complete = True
            self.footers += 1
        elif _NTHREAD.search(body):
            self.preambles += 1
            self.evidence = True
        elif m := _STARTING.search(body):
            self._set_collective(m.group(1), "log header")
        elif m := _TESTS_VERSION.search(body):
            run.nccl_tests_version = m.group(1)
            run.notes.append(f"nccl-tests {m.group(1)}")
        elif run.collective is None and not _CONCLUDED.search(body) and \
                (m := _COMMAND.search(line)):
            self._set_collective(m.group(1), "command line in log")
        if run.nccl_version is None and (m := _NCCL_VERSION.search(line)):
            run.nccl_version = m.group(1)

    def _set_collective(self, name: str, source: str) -> None:
        try:
            # MPI builds may be installed as all_reduce_perf_mpi
            self.run.collective = canonical_collective(name.removesuffix("_mpi"))
        except ValueError:
            return
        self.run.collective_source = source

    def _failure_lines(self) -> list[str]:
        """Why a run stopped: what came after its last row (else its WARN lines)."""
        if self.run.complete:
            return self.failures.lines()
        failures = self.after.lines()
        if not self.run.rows and not failures:
            failures = self.warn.lines()
        return failures[:MAX_FAILURE_LINES]

    def finish(self, collective: str | None, source: str | None,
               nranks: int | None) -> CollectiveRun:
        run = self.run
        _name_collective(run, collective, source)
        run.source = source
        run.network = self.net.result()
        _count_ranks(run, nranks)
        if self.headerless and run.rows:
            run.notes.append(f"no column header: columns inferred from the row shape "
                             f"({run.format} format)")
        if not run.rows and run.format:
            run.notes.append(f"column header in {run.format} format, but no data rows")
            run.format = None
        run.dtype = _uniform([r.dtype for r in run.rows])
        run.redop = _uniform([r.redop for r in run.rows])
        if self.interleaved or self.footers > 1:
            run.separate_processes = max(self.preambles, self.footers,
                                         max(self.rank_counts.values(), default=1))
        run.failure_lines = self._failure_lines()
        run.warn_lines = self.warn.lines()
        if self.warn.dropped:
            run.notes.append(f"{self.warn.dropped} more NCCL WARN lines not kept")
        run.cuda_version = _cuda_from_nccl(run.nccl_version)
        algo, why = self.algo.result(run.collective, len(run.hosts) or None)
        run.algorithm, run.algorithm_source = algo, why
        run.inconsistencies, notes = check_consistency(run)
        run.notes.extend(notes)
        return run


def _name_collective(run: CollectiveRun, given: str | None, source: str | None) -> None:
    """The log's own naming wins; ``given`` fills in (a multi-run file names each run)."""
    if given:
        wanted = canonical_collective(given)
        if run.collective and run.collective != wanted:
            run.notes.append(f"log says {run.collective}; --collective {wanted} ignored")
        elif run.collective is None:
            run.collective, run.collective_source = wanted, "given"
    if run.collective is None and source:
        run.collective = collective_from_name(source)
        run.collective_source = "file name" if run.collective else None


def _count_ranks(run: CollectiveRun, given: int | None) -> None:
    if given:
        run.nranks, run.nranks_source = given, "given"
    elif run.devices:
        run.nranks, run.nranks_source = len({d.rank for d in run.devices}), "device lines"
    elif run.info_nranks:
        run.nranks, run.nranks_source = max(run.info_nranks), "NCCL INFO lines"


def _cuda_from_nccl(version: str | None) -> str | None:
    m = re.search(r"\+cuda(\d+(?:\.\d+)*)", version or "")
    return m.group(1) if m else None


# lines after a footer that still belong to the finished run
_CONCLUDED = re.compile(r"Collective test concluded")
# lines held back after a footer before they are given to the finished run after all
_MAX_PENDING = 10_000


def _starts_run(body: str) -> bool:
    """A line that opens a run (a finished run never continues past one)."""
    return bool(header_tokens(body) or _NTHREAD.search(body) or _STARTING.search(body)
                or _TESTS_VERSION.search(body))


class _Splitter:
    """Cuts a line stream into runs and hands each line to the run it belongs to.

    Lines between a run's end (footer, or a crash) and the next run's start are held back
    (``pending``): shell traces, prompts and command lines there belong to the next run.
    """

    def __init__(self, collective: str | None, source: str | None, nranks: int | None):
        self.args = (collective, source, nranks)
        self.runs: list[CollectiveRun] = []
        self.cur = _RunReader()
        self.pending: list[str] = []
        self.evidence = False

    def feed(self, raw: str) -> None:
        line = strip_prefix(raw.rstrip("\r\n"))
        body = line.strip().lstrip("#").strip() if "NCCL INFO" not in line else ""
        starts = bool(body) and _starts_run(body)
        cur = self.cur
        if cur.run.complete and not cur.interleaved:
            if not starts:
                self._after_footer(line, body)
                return
            self._next_run()
        elif cur.unfinished and not cur.interleaved:
            if starts and not header_tokens(body):
                self._next_run()
            elif body and _COMMAND.search(line) and not _FAILURE.search(line):
                self.pending.append(line)    # the next run's command line, after a crash
                return
        self.cur.feed(line)

    def _after_footer(self, line: str, body: str) -> None:
        if _CONCLUDED.search(body):
            self._flush_pending()
            self.cur.feed(line)
            return
        self.pending.append(line)
        if len(self.pending) > _MAX_PENDING:
            self._flush_pending()

    def _flush_pending(self) -> None:
        for p in self.pending:
            self.cur.feed(p)
        self.pending = []

    def _next_run(self) -> None:
        self._close()
        self.cur = _RunReader()
        self._flush_pending()

    def _close(self) -> None:
        self.evidence = self.evidence or self.cur.evidence
        self.runs.append(self.cur.finish(*self.args))

    def end(self) -> list[CollectiveRun]:
        self._flush_pending()
        if not (self.evidence or self.cur.evidence):
            source = self.args[1]
            where = f" in {source}" if source else ""
            raise PctkError(f"no nccl-tests output found{where} (no 'size count type' "
                            "header, no data rows, no device lines, no failure lines)",
                            "pass the stdout of an nccl-tests binary (all_reduce_perf, ...)")
        self._close()
        return self.runs


def parse_nccl_lines(lines: Iterable[str], *, collective: str | None = None,
                     source: str | None = None,
                     nranks: int | None = None) -> list[CollectiveRun]:
    """Every run in a stream of nccl-tests output lines, in order; raises PctkError if none.

    Runs split where a finished run (footer seen) is followed by the start of another
    (header, ``# nThread``, ``Collective test starting``, ``nccl-tests version``), or
    where a run that stopped early is followed by another run's preamble. Lines in between
    (shell traces, command lines, prompts) belong to the next run, so a shell loop's
    ``+ ./build/all_gather_perf`` labels the run it starts. The outputs of processes that
    each ran alone (rank 0 printed by each) stay one run, flagged.
    """
    splitter = _Splitter(collective, source, nranks)
    for raw in lines:
        splitter.feed(raw)
    return splitter.end()


def parse_nccl_output(text: str, *, collective: str | None = None, source: str | None = None,
                      nranks: int | None = None) -> list[CollectiveRun]:
    """Every run in a nccl-tests log held in memory (see :func:`parse_nccl_lines`)."""
    return parse_nccl_lines(text.splitlines(), collective=collective, source=source,
                            nranks=nranks)


def parse_nccl_file(path: str | Path, *, collective: str | None = None,
                    nranks: int | None = None,
                    max_bytes: int = DEFAULT_MAX_READ_BYTES) -> list[CollectiveRun]:
    """Parse a text log (streamed, line by line) or a ``-J`` JSON file (first character
    ``{``). Only regular files, at most ``max_bytes`` read."""
    p = Path(path)
    try:
        with open_regular_text(p, max_bytes) as lines:
            first = ""
            head: list[str] = []
            for line in lines:
                head.append(line)
                first = line.strip()[:1]
                if first:
                    break
            if first == "{":
                text = "".join(head) + lines.read()
                return [parse_nccl_json(text, collective=collective, source=str(p),
                                        nranks=nranks)]
            return parse_nccl_lines(itertools.chain(head, lines), collective=collective,
                                    source=str(p), nranks=nranks)
    except NotRegularFile as exc:
        raise PctkError(str(exc), "save the output to a regular file and pass that") from None
    except InputTooLarge as exc:
        raise PctkError(str(exc), "raise --max-bytes if the log really is that large") from None
    except OSError as exc:
        raise PctkError(f"cannot read {p}: {exc.strerror}", "check the path") from None
