"""Nearest catalog instance types for a name the catalog does not know (likely a typo)."""

from __future__ import annotations

import difflib

from toolkit import catalog

CUTOFF = 0.75  # "p5.48xlarg" and "p5.48xl" match p5.48xlarge; "c7i.large" matches nothing


def closest_instance_types(name: str, n: int = 2) -> list[str]:
    known = [inst.name for inst in catalog.all_instances()]
    return difflib.get_close_matches(name.strip().lower(), known, n=n, cutoff=CUTOFF)


def unknown_type_hint(name: str) -> str:
    close = closest_instance_types(name)
    if close:
        return f"did you mean {' or '.join(close)}?"
    return "check the spelling; the types pctk knows are in toolkit/data/instances.yaml"
