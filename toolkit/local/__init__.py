"""The local twin: a real Slurm cluster on this machine, shaped like a ParallelCluster."""
