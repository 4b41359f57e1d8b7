"""The collectives core: one run model, checks, network/algorithm scanners, verdict, record,
comparison and report for collective benchmarks, whatever measured them. Its two sources are
nccl-tests (:mod:`toolkit.bench.nccl`: launch and parse) and the torch sweep
(:mod:`toolkit.bench.collectives`, :mod:`benchmarks.collectives`); the slow-node finder and
the results report use it too.

Both ``pctk bench nccl`` (kind ``nccl-tests``) and ``pctk bench collectives`` (kind
``collectives``, written node-side by :mod:`benchmarks.collectives`) store their results in
the shared ``pctk.result/v1`` record with this ``metrics`` layout, so the two sit side by
side in tables, plots and comparisons::

    "metrics": {
      "collectives": [                       # one block per collective / table / log
        {
          "collective": "all_reduce",        # nccl-tests name (alltoall, sendrecv, ...)
          "collective_source": "command line in log" | "file name" | "given" | ...,
          "dtype": "float", "redop": "sum",  # comma-joined if a log mixes several
          "nranks": 16, "nranks_source": "device lines" | "NCCL INFO lines" | "given",
          "devices": [{"rank", "host", "device", "bus", "name", "group", "pid"}],
          "hosts": ["node-1", ...],
          "format": "new" | "old" | "oldest" | "json" | "torch" | null (no data rows),
          "rows": [{
            "size_bytes": 1073741824,        # nccl-tests' printed size (total bytes)
            "count": 268435456,              # elements per rank, as printed
            "dtype": "float", "redop": "sum", "root": -1,
            "out_of_place": {"time_us", "algbw_gbps", "busbw_gbps",
                             "wrong": int | null,    # '#wrong'; null for N/A / old logs
                             "error": float | null}  # old 'error' column
                            | null,
            "in_place": {...} | null,
            "launch": "cuda_graph" | "eager",  # torch sweep: how the timed calls launched
            "launch_bound": bool               # torch sweep: small size, host launch cost
          }],
          "complete": true,                  # footer reached
          "failure_lines": [str],            # why it stopped (crash, NCCL WARN, srun error)
          "warn_lines": [str],               # every NCCL WARN line
          "out_of_bounds": {"count": 0, "status": "OK"} | null,
          "avg_busbw_gbps": 11.24 | null,    # footer 'Avg bus bandwidth'
          "network": {"transport": "efa" | "socket" | "ib" | "ofi-<prov>" | "mixed" |
                                   "unknown", "evidence": [str]},
          "nccl_version": "2.9.9+cuda11.2" | null,
          "inconsistencies": [{"size_bytes", "placement", "check", "reported", "expected"}],
          "source": "path/of/raw.log" | null,
          "notes": [str],
          "unsupported": str,                # torch sweep: backend lacks the collective
          "implementation": str,             # torch sweep: backend / EMULATED label
          "algorithm": "NVLS" | "Ring" | "Tree" | ... | null,   # toolkit.bench.comm.algorithm
          "algorithm_source": str | null,    # the setting or INFO lines it comes from
          "info_nranks": [int],              # nranks values of NCCL INFO comm lines
          "separate_processes": 1,           # >1: lone processes' outputs interleaved
          "repeated_sizes": 0,               # rows repeating a size (interleaved runs)
          "nccl_tests_version", "cuda_version", "cuda_driver": str | null,
          "timing": {"time_reduction": "mean" | "max", ...},  # torch sweep: over ranks
          "avg_busbw_sizes": [min, max],     # torch sweep: sizes avg_busbw_gbps covers
          "avg_busbw_gbps_not_launch_bound": float | null,    # torch sweep
          "verdict": {"status", "reasons"}   # added by the driver (toolkit.bench.comm.verdict)
        }
      ]
    }

Units: bytes, microseconds, GB/s (1e9 bytes/s) as nccl-tests prints them; algbw =
size_bytes / time, busbw = algbw x factor (2(n-1)/n all_reduce; (n-1)/n all_gather,
reduce_scatter, alltoall; 1 broadcast, reduce, sendrecv).
"""
