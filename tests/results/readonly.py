"""Run a command where one folder is a read-only mount, as root too.

Root writes through chmod 0400/0500, so a mode proves nothing in these tests. A read-only
mount stops root: the command runs in a private mount namespace (``unshare -m``: private
propagation, nothing reaches the host's mounts) where ``folder`` is bind-mounted read-only
over itself; every write under it is EROFS. The mount ends with the command.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# $0: the folder; then the command
READ_ONLY_MOUNT = 'mount --bind -o ro "$0" "$0" && exec "$@"'


def read_only_argv(folder: Path, *command: str) -> list[str]:
    """``command`` with ``folder`` read-only; skips the test where no such mount can be
    made (no unshare(1), no CAP_SYS_ADMIN)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1)")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", READ_ONLY_MOUNT, str(folder),
                            "sh", "-c", 'touch "$0/.probe"', str(folder)],
                           capture_output=True, text=True)
    if "Read-only file system" not in probe.stderr:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip()}")
    return ["unshare", "-m", "sh", "-c", READ_ONLY_MOUNT, str(folder), *command]
