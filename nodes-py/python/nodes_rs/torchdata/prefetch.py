"""``Prefetcher``: items read ahead on a thread of their own."""

from typing import TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source
from nodes_rs.torchdata.map import DEFAULT_SNAPSHOT_FREQUENCY

T = TypeVar("T")


class Prefetcher(NativeNode[T]):
    """Up to ``prefetch_factor`` items read ahead on a background thread.

    The thread snapshots its source as often as the source's work allows;
    ``snapshot_frequency`` is accepted for torchdata's signature.
    """

    def __init__(
        self,
        source: BaseNode[T],
        prefetch_factor: int,
        snapshot_frequency: int = DEFAULT_SNAPSHOT_FREQUENCY,
    ) -> None:
        super().__init__()
        if prefetch_factor < 1:
            raise ValueError(f"prefetch_factor must be at least 1, not {prefetch_factor}")
        self.source = source
        self.prefetch_factor = prefetch_factor
        self._native = _native.prefetch(native_source(source), prefetch_factor)


__all__ = ["Prefetcher"]
