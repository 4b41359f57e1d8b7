"""Cluster health, driver side: pick nodes, run the node checks in one Slurm job per
partition, judge, tabulate, drain and resume.

The checks themselves live node-side in :mod:`benchmarks.health` (standard library only);
this package turns Slurm's view of the nodes and the instance catalog into expectations,
submits ``sbatch/health-sweep.sbatch``, gathers one JSON report per node and writes a
``pctk.result/v1`` record of kind ``health``.
"""

from __future__ import annotations

from toolkit.health.sweep import SweepOptions, SweepResult, run_sweep

__all__ = ["SweepOptions", "SweepResult", "run_sweep"]
