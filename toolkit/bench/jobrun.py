"""What every benchmark's submitted job answers once it was waited for: whether it failed."""

from __future__ import annotations

from typing import Any


class Ran:
    """Mixin of a benchmark's run (``FsdpRun``, ``InferenceRun``, ``ServeRun``): frozen
    dataclasses with ``state`` (Slurm's final state, None when not waited for) and ``record``
    (the result record the job wrote, None without one)."""

    state: str | None
    record: dict[str, Any] | None

    @property
    def failed(self) -> bool:
        """The job did not complete, or its record's verdict is FAIL (no record: not known)."""
        return self.record is not None and (
            self.state != "COMPLETED" or self.record["verdict"]["status"] == "FAIL")
