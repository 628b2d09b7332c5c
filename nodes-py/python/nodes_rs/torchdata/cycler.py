"""``Cycler``: the source again and again."""

from typing import Optional, TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source

T = TypeVar("T")


class Cycler(NativeNode[T]):
    """The source's passes one after another, at most ``max_cycles`` of them;
    an empty source yields nothing."""

    def __init__(self, source_node: BaseNode[T], max_cycles: Optional[int] = None) -> None:
        super().__init__()
        if max_cycles is not None and max_cycles <= 0:
            raise ValueError("max_cycles must be positive if specified")
        self.source = source_node
        self.max_cycles = max_cycles
        self._native = _native.cycle(native_source(source_node), max_cycles)

    @property
    def num_cycles(self) -> int:
        """How many times the source ended and started again this pass."""
        return int(self.get_state()["num_cycles"])

    @property
    def has_started(self) -> bool:
        """Whether the source yielded anything this pass."""
        return bool(self.get_state()["has_started"])


__all__ = ["Cycler"]
