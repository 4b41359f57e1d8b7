"""Why a job ended without its result record, read from the end of its log.

A job that dies says why last: a traceback ends with the exception, slurmstepd adds its
oom-kill notice after the program's own output. So pctk reads the end of the log (at most
:data:`TAIL_BYTES`, whatever the log's length), never its first kilobytes, and only a regular
file (a FIFO would block, a symbolic link could point anywhere). The last line that names a
known cause decides; Slurm's OUT_OF_MEMORY state is one on its own.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import PctkError, visible
from toolkit.fsutil import NotRegularFile, read_regular_tail

TAIL_BYTES = 64 * 1024
SHOWN_CHARS = 200  # of the line quoted in the error


@dataclass(frozen=True)
class Cause:
    what: str  # "no space left on device"
    hint: str


NO_SPACE = Cause("no space left on device",
                 "free space on the file system the job writes to (its run folder, "
                 "checkpoints), or give it a --run-dir elsewhere")
OUT_OF_MEMORY = Cause("out of memory",
                      "use a smaller model, batch or sequence, or nodes with more memory")
BAD_DATA = Cause("bad input data", "fix the data file the log names")
KILLED = Cause("out of memory, most likely (killed by SIGKILL, the kernel's OOM killer's "
               "signal)", OUT_OF_MEMORY.hint)

# what each cause prints, in the words of Python, PyTorch, the kernel and slurmstepd
PATTERNS: tuple[tuple[re.Pattern[str], Cause], ...] = (
    (re.compile(r"No space left on device|\bENOSPC\b|\[Errno 28\]"), NO_SPACE),
    (re.compile(r"oom[-_ ]kill|out of memory|OutOfMemoryError|\bMemoryError\b", re.I),
     OUT_OF_MEMORY),
    (re.compile(r"\bKilled\b"), KILLED),  # bash's and srun's word for a SIGKILLed task
    # the data loaders' own error (benchmarks.fsdp.data.DataError), raised or printed
    (re.compile(r"\bDataError\b"), BAD_DATA),
)


@dataclass(frozen=True)
class Tail:
    lines: list[str]  # the log's last lines, blank ones dropped
    problem: str | None = None  # why there are none: "no log", "empty", "a FIFO", ...


def read_tail(log: Path, max_bytes: int = TAIL_BYTES) -> Tail:
    """The last lines of ``log`` (a partial first line dropped when the log is longer)."""
    try:
        data = read_regular_tail(log, max_bytes)
    except FileNotFoundError:
        return Tail([], "no log")
    except NotRegularFile as exc:
        return Tail([], str(exc).removeprefix(f"{log}: "))
    except OSError as exc:
        return Tail([], f"cannot read the log: {exc.strerror}")
    if len(data) == max_bytes and b"\n" in data:
        data = data[data.index(b"\n") + 1:]
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines()]
    lines = [ln for ln in lines if ln]
    return Tail(lines, None if lines else "empty log")


def classify(state: str, lines: list[str]) -> tuple[Cause | None, str | None]:
    """(cause, the log line that shows it): the last such line; Slurm's OUT_OF_MEMORY
    state without one is out of memory too."""
    for line in reversed(lines):
        for pattern, cause in PATTERNS:
            if pattern.search(line):
                return cause, line
    if state.startswith("OUT_OF_MEMORY"):
        return OUT_OF_MEMORY, None
    return None, None


def _shown(line: str) -> str:
    line = visible(line)
    return line if len(line) <= SHOWN_CHARS else line[:SHOWN_CHARS - 3] + "..."


def no_record_error(job_id: str, state: str, log: Path, *, what: str = "job",
                    suffix: str = "") -> PctkError:
    """The one-line error of a job that ended without its record: the cause its log's end
    shows (``job 12 ended FAILED without a result record: no space left on device
    (.../slurm-12.out, last line: OSError: [Errno 28] ...)``), else that last line."""
    head = f"{what} {job_id} ended {state} without a result record{suffix}"
    tail = read_tail(log)
    if tail.problem:
        return PctkError(f"{head} ({tail.problem}: {log})", "see `pctk jobs` for its state")
    cause, line = classify(state, tail.lines)
    if cause is None:
        return PctkError(f"{head} ({log}, last line: {_shown(tail.lines[-1])})",
                         f"read the log's end: tail -n 50 {shlex.quote(str(log))}")
    if line is None:
        where = f"Slurm: {state}; {log}, last line: {_shown(tail.lines[-1])}"
    else:
        which = "last line" if line == tail.lines[-1] else "line"
        where = f"{log}, {which}: {_shown(line)}"
    return PctkError(f"{head}: {cause.what} ({where})", cause.hint)
