"""Amounts as people write them on a command line or in a notebook: ``15T`` tokens, ``8B``
parameters, ``$500,000``; anything else is a one-line :class:`PlanError`."""

from __future__ import annotations

import math
import re

from toolkit.plan.model import PlanError

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?)\s*([kmbgtp]?)\s*$",
                     re.IGNORECASE)


def parse_amount(text: str, flag: str) -> float:
    """``15T``, ``1.4e12``, ``8B``, ``2.5M`` -> float; anything else is a one-line error."""
    match = _NUMBER.match(text.replace(",", "").replace("_", ""))
    if not match:
        raise PlanError(f"{flag} {text!r} is not a number", "write e.g. 15T, 1.4e12 or 8B")
    value = float(match.group(1)) * _SUFFIX[match.group(2).lower()]
    if not math.isfinite(value):
        raise PlanError(f"{flag} {text!r} is not a finite number")
    return value


def amount(value: str | float | None, flag: str) -> float | None:
    """A number given as text (parsed) or as a number (kept); None stays None."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise PlanError(f"{flag} {value!r} is not a finite number")
        return float(value)
    return parse_amount(str(value), flag)


def parse_usd(text: str, flag: str = "--budget") -> float:
    """``$500,000``, ``500k``, ``1.2M``, ``250000`` -> US dollars; else a one-line error."""
    number = text.strip()
    number = number[1:] if number.startswith("$") else number
    try:
        return parse_amount(number, flag)
    except PlanError:
        raise PlanError(f"{flag} {text!r} is not an amount of US dollars",
                        "write e.g. 500000, $500,000, 500k or 1.2M") from None
