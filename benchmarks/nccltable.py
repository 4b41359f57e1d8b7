"""The nccl-tests table, the one parser of its rows: the column header (or, for a paste that
lost it, the row's shape), and each data row as a :class:`Row` of two :class:`Measurement`
(out-of-place, in-place).

Standard library only, on both sides: the driver's parser (:mod:`toolkit.bench.nccl.parse`,
which adds everything around the table: devices, network, failures, footers) and the node's
pre-flight check (:mod:`benchmarks.health.perf`) read rows with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Measurement:
    """One placement (out-of-place or in-place) of one row."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None = None          # '#wrong' column; None for 'N/A' or old logs
    error: float | None = None        # old 'error' column (max abs error)
    # the printed text, kept to know the rounding of each figure
    text: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"time_us": self.time_us, "algbw_gbps": self.algbw_gbps,
                "busbw_gbps": self.busbw_gbps, "wrong": self.wrong, "error": self.error}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Measurement | None:
        if d is None:
            return None
        return cls(float(d["time_us"]), float(d["algbw_gbps"]), float(d["busbw_gbps"]),
                   d.get("wrong"), d.get("error"))


@dataclass
class Row:
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Measurement | None
    in_place: Measurement | None

    def primary(self) -> Measurement | None:
        """The placement to plot and compare: out-of-place where measured."""
        return self.out_of_place or self.in_place

    def to_dict(self) -> dict[str, Any]:
        return {"size_bytes": self.size_bytes, "count": self.count, "dtype": self.dtype,
                "redop": self.redop, "root": self.root,
                "out_of_place": self.out_of_place.to_dict() if self.out_of_place else None,
                "in_place": self.in_place.to_dict() if self.in_place else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Row:
        return cls(int(d["size_bytes"]), int(d.get("count") or 0), d.get("dtype") or "?",
                   d.get("redop"), d.get("root"), Measurement.from_dict(d.get("out_of_place")),
                   Measurement.from_dict(d.get("in_place")))


_TIME_COLS = ("time", "cputime")
class Columns:
    """Where each figure sits in a data row, from the header's tokens."""

    def __init__(self, tokens: list[str]):
        starts = [i for i, t in enumerate(tokens) if t in _TIME_COLS]
        self.keys = tokens[:starts[0]] if starts else tokens
        self.groups: list[dict[str, int]] = []
        for n, s in enumerate(starts[:2]):
            end = starts[n + 1] if n + 1 < len(starts) else len(tokens)
            self.groups.append({("wrong" if t in ("#wrong", "error") else
                                 "time" if t in _TIME_COLS else t): i
                                for i, t in enumerate(tokens[s:end], start=s)})
        self.error_kind = "error" if "error" in tokens else "#wrong"
        self.width = max([i for g in self.groups for i in g.values()], default=len(tokens) - 1) + 1
        if "root" in self.keys:
            self.format = "new"
        elif "redop" in self.keys:
            self.format = "old"
        else:
            self.format = "oldest"

    def measurement(self, tokens: list[str], group: int) -> Measurement | None:
        if group >= len(self.groups):
            return None
        g = self.groups[group]
        text = {k: tokens[i] for k, i in g.items() if k in ("time", "algbw", "busbw", "wrong")}
        wrong: int | None = None
        error: float | None = None
        w = text.get("wrong", "N/A")
        if w != "N/A":
            if self.error_kind == "error":
                error = float(w)
            else:
                wrong = int(float(w))
        return Measurement(float(text["time"]), float(text["algbw"]), float(text["busbw"]),
                           wrong, error, text)

    def row(self, tokens: list[str]) -> Row | None:
        if len(tokens) < self.width or not (tokens[0].isdigit() and tokens[1].isdigit()):
            return None
        k = {name: tokens[i] for i, name in enumerate(self.keys)}
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k.get("type", "")):
            return None
        try:
            oop, ip = self.measurement(tokens, 0), self.measurement(tokens, 1)
        except (ValueError, KeyError):
            return None
        root = k.get("root")
        return Row(int(k["size"]), int(k["count"]), k["type"], k.get("redop"),
                   int(root) if root and root.lstrip("-").isdigit() else None, oop, ip)


# the row shapes nccl-tests has printed, for pastes that lost their column header
_DTYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float",
           "double", "bfloat16", "fp8_e4m3", "fp8_e5m2", "int", "char", "float16",
           "float32", "float64"}
_REDOPS = {"sum", "prod", "max", "min", "avg", "none", "premulsum", "mulsum"}
_SHAPES = {
    "new": "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
    "old": "size count type redop time algbw busbw error time algbw busbw error",
    "oldest": "size count type time algbw busbw error time algbw busbw error",
}


def header_tokens(body: str) -> list[str] | None:
    tokens = body.split()
    return tokens if tokens[:3] == ["size", "count", "type"] else None


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def infer_columns(tokens: list[str]) -> Columns | None:
    """Columns for a data row seen without a header, from its shape; None if not a row."""
    if len(tokens) < 11 or not (tokens[0].isdigit() and tokens[1].isdigit()):
        return None
    if tokens[2] not in _DTYPES:
        return None
    if tokens[3] in _REDOPS:
        shape = "new" if len(tokens) == 13 and _is_int(tokens[4]) else \
            "old" if len(tokens) == 12 else None
    else:
        shape = "oldest" if len(tokens) == 11 else None
    if shape is None:
        return None
    cols = Columns(_SHAPES[shape].split())
    return cols if cols.row(tokens) is not None else None


def parse_rows(lines: Iterable[str]) -> list[Row]:
    """The data rows of one nccl-tests table, as its header (or the rows' shape) says."""
    cols: Columns | None = None
    rows: list[Row] = []
    for line in lines:
        if header := header_tokens(line.strip().lstrip("#").strip()):
            cols = Columns(header)
            continue
        if line.lstrip().startswith("#"):
            continue
        tokens = line.split()
        use = cols or infer_columns(tokens)
        if use is not None and (row := use.row(tokens)) is not None:
            rows.append(row)
    return rows
