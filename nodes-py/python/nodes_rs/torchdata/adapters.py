"""Sources from Python objects: iterables, samplers and map-style datasets."""

from typing import Callable, Iterable, Optional, Protocol, TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode
from nodes_rs.torchdata.map import Mapper

T = TypeVar("T")
K = TypeVar("K")
K_contra = TypeVar("K_contra", contravariant=True)
T_co = TypeVar("T_co", covariant=True)


class MapDataset(Protocol[K_contra, T_co]):
    """Anything indexable: a map-style dataset, a dict, a list."""

    def __getitem__(self, key: K_contra) -> T_co: ...


class IterableWrapper(NativeNode[T]):
    """The items of any iterable. Its state counts the items returned; restore
    fast-forwards a fresh iterator, or loads the iterable's own state when it
    has ``state_dict``/``load_state_dict``."""

    def __init__(self, iterable: Iterable[T]) -> None:
        super().__init__()
        self.iterable = iterable
        self._native = _native.iterable(iterable)


class SamplerWrapper(NativeNode[T]):
    """The items of a sampler, whose epoch moves on after every pass that
    started (by ``epoch_updater``, default one) and reaches its
    ``set_epoch``."""

    def __init__(
        self,
        sampler: Iterable[T],
        initial_epoch: int = 0,
        epoch_updater: Optional[Callable[[int], int]] = None,
    ) -> None:
        super().__init__()
        self.sampler = sampler
        self._native = _native.sampler(sampler, initial_epoch, epoch_updater)

    @property
    def epoch(self) -> int:
        """The sampler's epoch in the current pass."""
        return int(self.get_state()["epoch"])


def MapStyleWrapper(map_dataset: MapDataset[K, T], sampler: Iterable[K]) -> BaseNode[T]:
    """``map_dataset[key]`` for each key the sampler yields."""
    return Mapper(SamplerWrapper(sampler), map_dataset.__getitem__)


__all__ = ["IterableWrapper", "MapStyleWrapper", "SamplerWrapper"]
