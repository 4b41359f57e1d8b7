"""Driver side of the benchmarks, one home per node-side home: ``nccl/`` (nccl-tests),
``collectives/`` (:mod:`benchmarks.collectives`), ``fsdp`` (:mod:`benchmarks.fsdp`) and
``storage/`` (:mod:`benchmarks.storage`). Each launches, parses, judges and reports; the two
collective benchmarks share ``comm/``, the collectives core (run model, verdict, record,
comparison, report)."""
