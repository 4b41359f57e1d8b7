"""pctk: a toolkit for foundation-model work on AWS ParallelCluster with Slurm."""

from toolkit.errors import PctkError

__version__ = "0.1.0"
__all__ = ["PctkError", "__version__"]
