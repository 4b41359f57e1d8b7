"""Finding and running the node's tools (fi_info, dcgmi, chronyc, ...) with a time limit."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

# Where the tools live on ParallelCluster AMIs, which a Slurm job's PATH often misses.
DEFAULT_TOOL_DIRS = ("/opt/amazon/efa/bin", "/usr/local/cuda/bin", "/opt/nccl-tests/build",
                     "/usr/bin", "/usr/sbin", "/bin", "/sbin")


@dataclass(frozen=True)
class ToolRun:
    rc: int
    out: str
    err: str


class Tools:
    """Looks in the extra folders first (``%n`` = node name), then PATH, then the defaults."""

    def __init__(self, extra_dirs: list[str] | None = None, node: str = ""):
        dirs = [d.replace("%n", node) for d in (extra_dirs or [])]
        dirs += os.environ.get("PATH", "").split(os.pathsep)
        dirs += list(DEFAULT_TOOL_DIRS)
        self.path = os.pathsep.join(d for d in dict.fromkeys(dirs) if d)

    def find(self, name: str) -> str | None:
        return shutil.which(name, path=self.path)

    def run(self, argv: list[str], timeout: float = 10.0, stdin: str | None = None
            ) -> ToolRun | None:
        """Run ``argv`` (its first word looked up here); None when the tool is absent."""
        exe = self.find(argv[0])
        if exe is None:
            return None
        env = dict(os.environ, PATH=self.path, LC_ALL="C")
        try:
            r = subprocess.run([exe, *argv[1:]], capture_output=True, text=True,
                               timeout=timeout, input=stdin, env=env, errors="replace")
        except subprocess.TimeoutExpired:
            return ToolRun(124, "", f"{argv[0]} gave no answer within {timeout:g}s")
        except OSError as exc:
            return ToolRun(126, "", f"{argv[0]}: {exc.strerror}")
        return ToolRun(r.returncode, r.stdout, r.stderr)
