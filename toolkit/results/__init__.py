"""Stored results: a SQLite database of result records and raw logs, comparisons against
baselines, the HTML report and the Prometheus textfile.

The store and comparison are light (standard library only); the report imports matplotlib
when it is built.
"""

from toolkit.results.compare import Comparison, compare_records
from toolkit.results.store import ResultStore, default_db_path

__all__ = ["Comparison", "ResultStore", "compare_records", "default_db_path"]
