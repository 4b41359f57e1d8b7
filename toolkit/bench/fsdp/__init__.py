"""``pctk bench fsdp``: the driver side of ``benchmarks/fsdp`` (driver.py: plain functions
that plan, submit and return records; command.py: the typer command over them)."""
