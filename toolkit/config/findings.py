"""Findings: what ``pctk config check`` reports, one per problem, in aws-parallelcluster style."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

YamlPath = tuple[str | int, ...]


class Level(StrEnum):
    ERROR = "ERROR"
    WARNING = "WARNING"
    INFO = "INFO"


def format_path(path: YamlPath) -> str:
    """``("Scheduling", "SlurmQueues", 0, "Name")`` -> ``Scheduling.SlurmQueues[0].Name``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


@dataclass(frozen=True)
class Finding:
    level: Level
    stage: str  # "yaml" | "placeholders" | "schema" | "validator" | "lint" | "drift"
    code: str  # short stable id, e.g. "min-gt-max"
    path: YamlPath
    message: str
    hint: str | None = None
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based

    @property
    def path_str(self) -> str:
        return format_path(self.path)

    def where(self, source: str) -> str:
        loc = source
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        return loc

    def to_json(self, source: str) -> dict[str, Any]:
        data = asdict(self)
        data["level"] = self.level.value
        data["path"] = self.path_str
        data["file"] = source
        return data
