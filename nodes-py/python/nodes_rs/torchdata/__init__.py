"""torchdata.nodes' classes, on the Rust pipelines of ``nodes_rs``.

Change ``import torchdata.nodes as tn`` to ``import nodes_rs.torchdata as tn``.
Native nodes run in Rust with the GIL released; Python ``BaseNode``
subclasses can be their sources or their parents. States are plain dicts.
"""

from nodes_rs.torchdata.adapters import IterableWrapper, MapStyleWrapper, SamplerWrapper
from nodes_rs.torchdata.base_node import BaseNode, T
from nodes_rs.torchdata.batch import Batcher, Unbatcher
from nodes_rs.torchdata.cycler import Cycler
from nodes_rs.torchdata.filter import Filter
from nodes_rs.torchdata.header import Header
from nodes_rs.torchdata.loader import Loader
from nodes_rs.torchdata.map import Mapper, ParallelMapper
from nodes_rs.torchdata.pin_memory import PinMemory
from nodes_rs.torchdata.prefetch import Prefetcher
from nodes_rs.torchdata.samplers.multi_node_weighted_sampler import MultiNodeWeightedSampler
from nodes_rs.torchdata.samplers.stop_criteria import StopCriteria
from nodes_rs.torchdata.types import Stateful

__all__ = [
    "BaseNode",
    "Batcher",
    "Cycler",
    "Filter",
    "Header",
    "IterableWrapper",
    "Loader",
    "MapStyleWrapper",
    "Mapper",
    "MultiNodeWeightedSampler",
    "ParallelMapper",
    "PinMemory",
    "Prefetcher",
    "SamplerWrapper",
    "Stateful",
    "StopCriteria",
    "T",
    "Unbatcher",
]
