"""``MultiNodeRoundRobinSampler``: one item of each source in turn."""

from typing import Any, Dict, List, Mapping, TypeVar, Union

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source
from nodes_rs.torchdata.samplers.stop_criteria import StopCriteria

T = TypeVar("T")


class MultiNodeRoundRobinSampler(NativeNode[T]):
    """One item of each source in turn; a list of sources is named ``ds_0``,
    ``ds_1``, ... ``CYCLE_FOREVER`` is refused, as in torchdata."""

    def __init__(
        self,
        source_nodes: Union[Mapping[str, BaseNode[T]], List[BaseNode[T]]],
        stop_criteria: str = StopCriteria.CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED,
        tag_output: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(tag_output, bool):
            raise TypeError(f"tag_output must be a boolean (True/False), got {tag_output!r}")
        if stop_criteria == StopCriteria.CYCLE_FOREVER:
            raise ValueError("MultiNodeRoundRobinSampler does not support CYCLE_FOREVER")
        if isinstance(source_nodes, list):
            source_nodes = {f"ds_{i}": node for i, node in enumerate(source_nodes)}
        self.source_nodes = source_nodes
        self.stop_criteria = stop_criteria
        self.tag_output = tag_output
        sources: Dict[str, Any] = {k: native_source(v) for k, v in source_nodes.items()}
        self._native = _native.round_robin(sources, stop_criteria, tag_output)


__all__ = ["MultiNodeRoundRobinSampler"]
