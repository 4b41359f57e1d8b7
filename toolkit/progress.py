"""Progress of a long command: a live line on a terminal, plain timestamped lines otherwise.

Under ``nohup``, in a CI log or piped to a file, a spinner or bar prints nothing until the
end, so a job that runs for minutes looks hung. There each new message becomes one line on
stderr, and an unchanged message is repeated every ``heartbeat_s`` seconds with the time
elapsed, so a log always shows the command is alive.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import IO, Any


class ProgressLines:
    """``with ProgressLines("bench fsdp") as p: p.update("job 12: RUNNING")``."""

    def __init__(self, title: str, *, quiet: bool = False, heartbeat_s: float = 30.0,
                 stream: IO[str] | None = None, terminal: bool | None = None) -> None:
        self.title = title
        self.quiet = quiet
        self.heartbeat_s = heartbeat_s
        self._stream = stream
        self._terminal = terminal
        self._start = time.monotonic()
        self._last_message: str | None = None
        self._last_line = 0.0
        self._status: Any = None

    @property
    def stream(self) -> IO[str]:
        return self._stream if self._stream is not None else sys.stderr

    @property
    def terminal(self) -> bool:
        if self._terminal is None:
            self._terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        return self._terminal

    def __enter__(self) -> ProgressLines:
        self._start = time.monotonic()
        if not self.quiet and self.terminal:
            from rich.console import Console  # only on a terminal: piped runs skip it

            self._status = Console(file=self.stream).status(self.title)
            self._status.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._status is not None:
            self._status.__exit__(kind, exc, tb)
            self._status = None

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def update(self, message: str) -> None:
        if self.quiet:
            return
        elapsed = self.elapsed()
        if self._status is not None:
            self._status.update(f"{self.title}: {message} ({elapsed:.0f}s)")
            return
        now = time.monotonic()
        if message == self._last_message and now - self._last_line < self.heartbeat_s:
            return
        stamp = time.strftime("%H:%M:%S")
        print(f"{stamp} {self.title}: {message} ({elapsed:.0f}s)", file=self.stream, flush=True)
        self._last_message, self._last_line = message, now
