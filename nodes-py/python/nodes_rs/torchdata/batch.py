"""``Batcher`` and ``Unbatcher``: lists of items, and back."""

from typing import List, Sequence, TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source

T = TypeVar("T")


class Batcher(NativeNode[List[T]]):
    """Lists of ``batch_size`` items; a shorter last list unless ``drop_last``.
    A ``batch_size`` below 1 is a ``ValueError`` (torchdata loops forever)."""

    def __init__(self, source: BaseNode[T], batch_size: int, drop_last: bool = True) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.source = source
        self.batch_size = batch_size
        self.drop_last = drop_last
        self._native = _native.batch(native_source(source), batch_size, drop_last)


class Unbatcher(NativeNode[T]):
    """The elements of each item (a sequence), in order."""

    def __init__(self, source: BaseNode[Sequence[T]]) -> None:
        super().__init__()
        self.source = source
        self._native = _native.unbatch(native_source(source))


__all__ = ["Batcher", "Unbatcher"]
