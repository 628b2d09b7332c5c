"""``Filter``: the items a predicate keeps."""

from typing import Callable, TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source

T = TypeVar("T")


class Filter(NativeNode[T]):
    """The items for which ``filter_fn`` returns a true value."""

    def __init__(self, source_node: BaseNode[T], filter_fn: Callable[[T], bool]) -> None:
        super().__init__()
        self.source = source_node
        self.filter_fn = filter_fn
        self._native = _native.filter(native_source(source_node), filter_fn)

    @property
    def num_yielded(self) -> int:
        """Items kept this pass."""
        return int(self.get_state()["num_yielded"])

    @property
    def num_filtered(self) -> int:
        """Items dropped this pass."""
        return int(self.get_state()["num_filtered"])


__all__ = ["Filter"]
