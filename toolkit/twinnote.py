"""What a figure measured on pctk's local twin is worth, in one place.

The report's TWIN badge and cluster summary, the scaling plots and the bench commands'
summaries all say it in these words, so a figure from the twin never reaches a reader without
them (a twin's storage run printed "PASS 255% of expected" while the report carried the
caveat). A record is from the twin when ``cluster.twin`` is true (benchmarks/record.py sets
it from a loopback slurmctld).
"""

from __future__ import annotations

from typing import Any

# the twin in one clause: why its figures are not a cluster's
EMULATED = "Slurm is real, nodes are emulated on one host, so figures are not hardware figures"
# what stands in for what, per record kind: the figure that most invites a wrong conclusion
STAND_INS = {
    "storage": "the shared file system is a local folder on this host's disk standing in "
               "for FSx, so MB/s, IOPS and the % of expected are the local disk's, not FSx's",
}


def on_twin(record: dict[str, Any]) -> bool:
    return (record.get("cluster") or {}).get("twin") is True


def twin_caveat(record: dict[str, Any]) -> str | None:
    """One sentence for a record from the twin (None for any other): what was emulated and,
    for kinds in ``STAND_INS``, what its figure really measured."""
    if not on_twin(record):
        return None
    text = f"measured on pctk's local twin: {EMULATED}"
    stand_in = STAND_INS.get(str(record.get("kind")))
    return f"{text}; {stand_in}" if stand_in else text
