"""Driver side of the benchmarks: launch, parse, judge, report."""
