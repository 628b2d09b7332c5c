"""``Header``: the first ``n`` items."""

from typing import TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source

T = TypeVar("T")


class Header(NativeNode[T]):
    """The first ``n`` items of the source (never pulling more)."""

    def __init__(self, source_node: BaseNode[T], n: int) -> None:
        super().__init__()
        if n < 0:
            raise ValueError("n must be non-negative")
        self.source = source_node
        self.n = n
        self._native = _native.header(native_source(source_node), n)

    @property
    def num_yielded(self) -> int:
        """Items returned this pass."""
        return int(self.get_state()["num_yielded"])


__all__ = ["Header"]
