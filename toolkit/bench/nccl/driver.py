"""What ``pctk bench nccl`` does, as plain functions: read logs or launch the binaries,
judge each run, build and write the record; compare two runs; plot several.

Each returns its result; the command (:mod:`toolkit.bench.nccl.cli`) only parses flags,
calls one of these and prints what comes back. Python code (a notebook, a health sweep)
calls them the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.bands import REGRESSION as DEFAULT_THRESHOLD
from benchmarks.record import RecordError, validate_record, write_record
from benchmarks.vocab import canonical_collective, parse_bytes
from toolkit.bench.comm.compare import DEFAULT_MIN_BYTES, Comparison, compare_runs
from toolkit.bench.comm.model import CollectiveRun
from toolkit.bench.comm.record import build_record, judge_runs, runs_from_record
from toolkit.bench.comm.report import plot_busbw, run_title
from toolkit.bench.comm.verdict import Verdict
from toolkit.bench.nccl.parse import parse_nccl_file
from toolkit.errors import PctkError
from toolkit.fsutil import (
    DEFAULT_MAX_READ_BYTES,
    InputTooLarge,
    NotRegularFile,
    open_regular_text,
)
from toolkit.paths import new_run_dir


@dataclass
class NcclResult:
    """Runs with their verdicts, the record built from them and where it was written."""
    runs: list[CollectiveRun]
    verdicts: list[Verdict]
    record: dict[str, Any]
    record_path: Path | None = None

    @property
    def failed(self) -> bool:
        return bool(self.record["verdict"]["status"] == "FAIL")


def parse_logs(files: Sequence[Path], *, collective: str | None = None,
               nranks: int | None = None, instance_type: str | None = None,
               nodes: int | None = None, expected_ranks: int | None = None,
               max_bytes: int = DEFAULT_MAX_READ_BYTES, out: Path | None = None) -> NcclResult:
    """Parse nccl-tests logs (text or -J JSON), cross-check and judge every run; the record
    is written to ``out`` when given (its raw logs named relative to it)."""
    runs = [r for f in files
            for r in parse_nccl_file(f, collective=collective, nranks=nranks,
                                     max_bytes=max_bytes)]
    verdicts = judge_runs(runs, instance_type=instance_type, nodes=nodes,
                          expected_ranks=expected_ranks)
    rec = build_record("nccl-tests", runs, verdicts,
                       params={"files": [str(f) for f in files], "collective": collective,
                               "instance_type": instance_type, "nodes": nodes,
                               "expect_ranks": expected_ranks},
                       raw_logs=[os.path.relpath(f, out.parent) if out else str(f)
                                 for f in files],
                       cluster={"instance_type": instance_type, "nodes": nodes},
                       from_log=True)
    if out:
        write_record(out, rec)
    return NcclResult(runs, verdicts, rec, out)


def _sizes_row(line: str) -> bool:
    """A data row of nccl-tests' table (for progress only; the parser reads the log)."""
    return line.strip()[:1].isdigit() and ("sum" in line or "float" in line)


def run_tests(collectives: Sequence[str], *, nodes: int = 1, gpus_per_node: int = 8,
              launcher: str = "srun", partition: str | None = None, min_bytes: str = "8",
              max_bytes: str = "16G", iters: int = 20, warmup: int = 5,
              nccl_tests_dir: str | None = None, env: dict[str, str] | None = None,
              run_dir: Path | None = None, instance_type: str | None = None,
              timeout: float = 1800,
              on_launch: Callable[[str, list[str]], None] | None = None,
              on_sizes: Callable[[str, int], None] | None = None) -> NcclResult:
    """Run one nccl-tests binary per collective with the EFA environment, one after the
    other, each log kept in ``run_dir`` (default: a new run folder); judge the runs against
    the ranks launched and write ``run_dir/record.json``.

    ``on_launch(name, command)`` is called as each binary starts, ``on_sizes(name, n)`` as
    its n-th size is printed. A binary that prints no table is a FAIL run, not an error."""
    # the launcher imports toolkit.submit, whose package loads submitit: only `run` pays
    from toolkit.bench.nccl.runner import (
        LaunchSpec,
        build_command,
        find_binary,
        launch_env,
        run_logged,
    )

    try:
        names = [canonical_collective(c) for c in collectives]
    except ValueError as exc:
        raise PctkError(str(exc), None) from None
    for flag, size in (("--min-bytes", min_bytes), ("--max-bytes", max_bytes)):
        try:
            parse_bytes(size)
        except ValueError as exc:
            raise PctkError(f"{flag}: {exc}", "write sizes like 8, 64K, 16G") from None
    extra = dict(env or {})
    out_dir = run_dir or new_run_dir("nccl-tests")
    runs: list[CollectiveRun] = []
    logs, commands = [], []
    for name in names:
        spec = LaunchSpec(name, nodes=nodes, gpus_per_node=gpus_per_node, launcher=launcher,
                          min_bytes=min_bytes, max_bytes=max_bytes, iters=iters,
                          warmup=warmup, partition=partition, extra_env=extra)
        cmd = build_command(spec, find_binary(name, nccl_tests_dir))
        log = out_dir / f"{name}.log"
        if on_launch:
            on_launch(name, cmd)
        rows = 0

        def progress(line: str, name: str = name) -> None:
            nonlocal rows
            if _sizes_row(line):
                rows += 1
                if on_sizes:
                    on_sizes(name, rows)
        outcome = run_logged(cmd, launch_env(spec), log, timeout=timeout, on_line=progress)
        try:
            found = parse_nccl_file(log, collective=name)
        except PctkError:
            found = [CollectiveRun(name, "given", source=str(log), failure_lines=[
                f"no nccl-tests output; exit status {outcome.returncode}"])]
        runs += found
        logs.append(log.name)
        commands.append(cmd)
    verdicts = judge_runs(runs, instance_type=instance_type, nodes=nodes,
                          expected_ranks=nodes * gpus_per_node)
    rec = build_record("nccl-tests", runs, verdicts, raw_logs=logs, from_log=True,
                       params={"collectives": names, "nodes": nodes,
                               "gpus_per_node": gpus_per_node, "launcher": launcher,
                               "min_bytes": min_bytes, "max_bytes": max_bytes, "iters": iters,
                               "warmup": warmup, "commands": commands, "env": extra},
                       cluster={"instance_type": instance_type, "nodes": nodes,
                                "partition": partition})
    rec["software"]["source"] = "nccl-tests logs"
    path = out_dir / "record.json"
    write_record(path, rec)
    return NcclResult(runs, verdicts, rec, path)


def compare_files(before: Path, after: Path, *, collective: str | None = None,
                  threshold: float = DEFAULT_THRESHOLD,
                  min_bytes: int = DEFAULT_MIN_BYTES) -> tuple[list[Comparison], list[str]]:
    """busbw per size between two runs (records or raw logs), and what could not be paired;
    a PctkError when nothing pairs."""
    comps, unmatched = compare_runs(load_runs(before, collective=collective),
                                    load_runs(after, collective=collective),
                                    threshold=threshold, min_bytes=min_bytes)
    if not comps:
        raise PctkError(f"nothing to compare between {before} and {after}"
                        + (f" ({'; '.join(unmatched)})" if unmatched else ""),
                        "compare runs of the same collective")
    return comps, unmatched


def plot_files(files: Sequence[Path], out: Path, *,
               collective: str | None = None) -> tuple[Path, int]:
    """One busbw PNG of every run in ``files`` (records or raw logs); (path, runs)."""
    runs, labels = [], []
    for f in files:
        for r in load_runs(f, collective=collective):
            runs.append(r)
            labels.append(f"{f.name}: {run_title(r).split(' | ')[0]}")
    return plot_busbw(out, runs, labels), len(runs)


def _read_if_json(p: Path) -> str | None:
    """The whole (bounded) text when the file starts with ``{``, else None."""
    try:
        with open_regular_text(p) as lines:
            for line in lines:
                if line.strip():
                    return line + lines.read() if line.lstrip().startswith("{") else None
    except (NotRegularFile, InputTooLarge) as exc:
        raise PctkError(str(exc), "pass a result record or an nccl-tests log") from None
    except OSError as exc:
        raise PctkError(f"cannot read {p}: {exc.strerror}", "check the path") from None
    return None


def load_runs(path: str | Path, *, collective: str | None = None,
              nranks: int | None = None) -> list[CollectiveRun]:
    """Runs from a result record (JSON with our schema) or from a raw nccl-tests log/JSON."""
    p = Path(path)
    if not p.exists():
        raise PctkError(f"{p}: no such file", "pass a result record or an nccl-tests log")
    text = _read_if_json(p)
    doc: Any = None
    if text is not None:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None  # maybe a truncated nccl-tests -J file: the parser salvages it
    if isinstance(doc, dict) and "schema" in doc:
        try:
            runs = runs_from_record(validate_record(doc))
        except RecordError as exc:
            raise PctkError(f"{p}: {exc}", "pass a valid pctk result record") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise PctkError(f"{p}: unreadable record ({exc})", "regenerate the record") from None
        for r in runs:
            r.source = r.source or str(p)
        return runs
    return parse_nccl_file(p, collective=collective, nranks=nranks)
