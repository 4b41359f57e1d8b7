"""ParallelCluster v3 configs: load, generate, check and describe."""

from toolkit.config.model import ClusterTopology, ComputeResource, Queue, load_topology

__all__ = ["ClusterTopology", "ComputeResource", "Queue", "load_topology"]
