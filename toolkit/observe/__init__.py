"""Observability: Slurm and cost metrics, the twin's Prometheus, alert rules, dashboard."""
