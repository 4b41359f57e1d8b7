"""Driver side of the shared file system benchmark (node side: :mod:`benchmarks.storage`):
submit ``sbatch/storage.sbatch``, wait, judge the record against the cluster config."""
