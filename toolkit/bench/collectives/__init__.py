"""Driver side of the torch.distributed collective sweep (node side:
:mod:`benchmarks.collectives`): submit ``sbatch/collectives.sbatch``, wait, judge the record
with the collectives core's verdict (:mod:`toolkit.bench.comm`)."""
