"""Fault points for pctk's own tests: one documented switch, ``PCTK_FAULT_POINTS``.

A test that must see the node side fail or stall at a known moment (a job killed after a
checkpoint, a benchmark held while it is requeued or interrupted) sets it in the job's
environment as comma-separated ``name=value`` pairs, e.g.
``PCTK_FAULT_POINTS=fsdp-crash-at-step=2``. Unset (as for every user run) nothing happens. A
name not listed in :data:`POINTS` is an error, so a misspelt fault cannot pass for a
fault-free run.
"""

from __future__ import annotations

import os

FAULT_ENV = "PCTK_FAULT_POINTS"
POINTS = {
    "fsdp-crash-at-step": "the FSDP benchmark exits hard (status 17) right after this step "
                          "and its checkpoint, in a run that did not resume",
    "fsdp-hold-after-step": "the FSDP benchmark sleeps up to 10 minutes after this step, in a "
                            "run that did not resume",
    "inference-hold-s": "the offline inference benchmark sleeps this many seconds before "
                        "measuring",
    "fsdp-world-backend-only-on": "the FSDP benchmark on CPUs binds its default process "
                                  "group's gloo only to this device type (cuda), as NCCL "
                                  "binds only cuda on a GPU node, and its training mesh's to "
                                  "the cpu: a collective off the mesh then fails as on GPUs",
}


def points(text: str | None = None) -> dict[str, str]:
    """The fault points set (``text``: the variable's value, default the environment's)."""
    raw = os.environ.get(FAULT_ENV, "") if text is None else text
    out: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in raw.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name not in POINTS:
            raise ValueError(f"{FAULT_ENV}: {item!r} is not a fault point; known: "
                             f"{', '.join(f'{n}=VALUE' for n in POINTS)}")
        out[name] = value
    return out


def number(name: str) -> float:
    """The value of fault point ``name`` as a number, 0 when it is not set."""
    value = points().get(name)
    return float(value) if value else 0.0


def text(name: str) -> str | None:
    """The value of fault point ``name`` as it was set, None when it is not set."""
    return points().get(name) or None


def setting(**values: float) -> str:
    """``PCTK_FAULT_POINTS=...`` for these points (keyword names with ``_`` for ``-``)."""
    pairs = {k.replace("_", "-"): v for k, v in values.items()}
    points(",".join(f"{k}={v:g}" for k, v in pairs.items()))  # known names only
    return f"{FAULT_ENV}=" + ",".join(f"{k}={v:g}" for k, v in pairs.items())
