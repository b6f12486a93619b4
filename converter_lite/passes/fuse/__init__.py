"""Graph-kernel clustering (basic fusion): the split model over the op kinds, MindSpore's CPU fusion
patterns, outlining of each fused area into a GraphKernel node, and redundant-output elimination."""
from . import cluster, redundant_output  # noqa: F401  (pass registration)
from .area import Area, Pattern, ReachTable, Relation
from .cluster import DEFAULT_CLUSTER, GraphKernelClusterPass, clusterable
from .outline import outline
from .patterns import FusePattern, cpu_patterns
from .redundant_output import EliminateRedundantOutputPass
from .split_model import SplitModel

__all__ = ["DEFAULT_CLUSTER", "Area", "EliminateRedundantOutputPass", "FusePattern", "GraphKernelClusterPass",
           "Pattern", "ReachTable", "Relation", "SplitModel", "clusterable", "cpu_patterns", "outline"]
