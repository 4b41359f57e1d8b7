"""The uniform result of one check, and how results fold into Nagios exit codes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OK, WARN, FAIL, SKIP = "OK", "WARN", "FAIL", "SKIP"
STATUSES = (OK, WARN, FAIL, SKIP)
# Nagios plugin convention: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN
NAGIOS_OK, NAGIOS_WARNING, NAGIOS_CRITICAL, NAGIOS_UNKNOWN = 0, 1, 2, 3
_RANK = {SKIP: 0, OK: 1, WARN: 2, FAIL: 3}


@dataclass(frozen=True)
class CheckResult:
    status: str
    value: Any = None
    expected: Any = None
    message: str = ""
    remedy: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "value": self.value, "expected": self.expected,
                "message": self.message, "remedy": self.remedy}


def ok(message: str, value: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(OK, value, expected, message)


def warn(message: str, remedy: str, value: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(WARN, value, expected, message, remedy)


def fail(message: str, remedy: str, value: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(FAIL, value, expected, message, remedy)


def skip(reason: str, value: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(SKIP, value, expected, reason)


def worst(statuses: list[str]) -> str:
    """The most severe status; SKIP only when nothing else was reported."""
    return max(statuses, key=lambda s: _RANK.get(s, 0), default=SKIP)


def nagios_code(statuses: list[str]) -> int:
    """FAIL -> 2, WARN -> 1, OK -> 0; nothing but SKIP (nothing checked) -> 3."""
    w = worst(statuses)
    return {FAIL: NAGIOS_CRITICAL, WARN: NAGIOS_WARNING, OK: NAGIOS_OK}.get(w, NAGIOS_UNKNOWN)
