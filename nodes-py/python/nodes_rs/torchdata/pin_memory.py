"""``PinMemory``: items moved to page-locked memory on a thread of their own
(needs torch)."""

import importlib
from typing import Any, TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source
from nodes_rs.torchdata.map import DEFAULT_SNAPSHOT_FREQUENCY, Mapper

T = TypeVar("T")


class PinMemory(NativeNode[T]):
    """Each item pinned with torch's ``pin_memory`` helper, one item ahead on a
    background thread. Without torch installed, constructing it raises an
    ``ImportError`` naming torch."""

    def __init__(
        self,
        source: BaseNode[T],
        pin_memory_device: str = "",
        snapshot_frequency: int = DEFAULT_SNAPSHOT_FREQUENCY,
    ) -> None:
        super().__init__()
        try:
            helpers = importlib.import_module("torch.utils.data._utils.pin_memory")
        except ImportError as e:
            raise ImportError("PinMemory needs torch, which is not installed") from e
        pin_memory = helpers.pin_memory
        device = pin_memory_device or None

        def pin(item: Any) -> Any:
            return pin_memory(item, device)

        self.source = source
        pinned = Mapper(source, pin)
        self._native = _native.prefetch(native_source(pinned), 1)


__all__ = ["PinMemory"]
