"""``pctk plan``: a capacity planner (FLOPs, GPU-hours, nodes, days, cost, memory, checkpoints).

Layer: results/observe (imports base, config and results; only toolkit/cli.py imports it).
"""
