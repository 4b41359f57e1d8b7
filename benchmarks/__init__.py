"""Workloads that run on compute nodes. Standard library and torch only: no driver-side
dependencies (matplotlib, aws-parallelcluster, rich) so they run in a lean container."""
