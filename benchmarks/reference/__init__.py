"""Reference peers pctk's benchmarks are measured against; not part of pctk's own path."""
