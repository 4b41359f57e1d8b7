"""SIGTERM and SIGHUP during ``pctk local up`` stop what was started, as Ctrl-C does.

A service manager, a batch system or a closing terminal ends a process with SIGTERM or
SIGHUP, whose default action kills Python at once: ``up`` would leave munged, MariaDB,
slurmdbd and slurmctld running with nobody to stop them. Inside :func:`as_exceptions` both
raise :class:`toolkit.errors.Terminated` in the main thread (SIGINT its KeyboardInterrupt),
so ``up``'s clean-up runs. Only the first signal raises: a second one while the clean-up
stops the daemons is ignored. Inside :func:`deferred` (a daemon started but its pid not yet
recorded) a signal waits until the pid is recorded.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from toolkit.errors import Terminated

SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

_critical = 0
_pending: int | None = None
_raised = False


def _raise(signum: int) -> None:
    global _raised
    _raised = True
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def _handler(signum: int, _frame: FrameType | None) -> None:
    global _pending
    if _raised:
        return  # the clean-up of the first signal runs: let it finish
    if _critical:
        _pending = signum
        return
    _raise(signum)


@contextlib.contextmanager
def as_exceptions() -> Iterator[None]:
    """SIGTERM/SIGHUP raise Terminated (SIGINT KeyboardInterrupt) until the block ends.

    Outside the main thread (signals go to the main thread only) it does nothing. Nested
    blocks share one state: the outermost one installs and restores the handlers.
    """
    global _raised, _pending
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is _handler:
        yield
        return
    _raised, _pending = False, None
    old = {s: signal.signal(s, _handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _raised, _pending = False, None


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A signal arriving in this block is raised when it ends (a pid must be recorded)."""
    global _critical, _pending
    _critical += 1
    try:
        yield
    finally:
        _critical -= 1
        if not _critical and _pending is not None and not _raised:
            signum, _pending = _pending, None
            _raise(signum)
