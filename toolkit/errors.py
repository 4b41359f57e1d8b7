"""One error type for everything a user can get wrong, with the fix beside the fault.

The CLI turns a :class:`PctkError` into one line on stderr and exit code ``2`` (unusable
input or environment); nothing else is allowed to reach the user as a traceback.
"""

from __future__ import annotations

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def visible(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\n``, ``\\x1b``, ``\\u2028``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _ESCAPES.get(c) or
                   (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") for c in text)


class PctkError(Exception):
    """A problem the user can fix: bad input, missing binary, unreachable daemon."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None, *, log: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.log = log

    def one_line(self) -> str:
        """Message, fix and log on one line: a control character that came in with a name or
        a path the user gave (a folder named with a newline) is shown escaped, never acted on."""
        parts = [self.message.rstrip(".")]
        if self.hint:
            parts.append(f"fix: {self.hint.rstrip('.')}")
        if self.log:
            parts.append(f"log: {self.log}")
        return visible("; ".join(parts))

    def __str__(self) -> str:
        return self.one_line()


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived while a command had to finish what it started (``pctk local
    up``): raised in the main thread like KeyboardInterrupt, so the same clean-up runs. The
    CLI exits 128 + the signal's number, as a shell reports a process ended by it."""

    def __init__(self, signum: int):
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum
