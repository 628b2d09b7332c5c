"""``Loader``: epochs over a pipeline, with checkpoints at any point."""

from typing import Any, Dict, Generic, Iterator, List, Optional, TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, native_source

T = TypeVar("T")


class Loader(Generic[T]):
    """Epochs over ``root``: each ``iter(loader)`` starts the next epoch, or
    resumes the state ``load_state_dict`` loaded (a state taken at the end of
    an epoch starts the next one, unless ``restart_on_stop_iteration`` is
    false). ``state_dict()`` works at any point. The root runs in Rust with
    the GIL released; states are plain dicts (JSON and pickle), checked
    against the pipeline's shape and a checksum when loaded. With
    ``check_shape=False`` a state of a deliberately changed pipeline (a new
    batch size, say) loads where it still fits.
    """

    def __init__(
        self,
        root: BaseNode[T],
        restart_on_stop_iteration: bool = True,
        *,
        record_stats: bool = False,
        check_shape: bool = True,
    ) -> None:
        self.root = root
        self.restart_on_stop_iteration = restart_on_stop_iteration
        self._native = _native.Loader(native_source(root), restart_on_stop_iteration, record_stats, check_shape)
        self._iterator: Optional[LoaderIterator[T]] = None

    def __iter__(self) -> "LoaderIterator[T]":
        self._native.start_epoch()
        if self._iterator is None:
            self._iterator = LoaderIterator(self)
        return self._iterator

    def state_dict(self) -> Dict[str, Any]:
        """The state after the last item returned."""
        state: Dict[str, Any] = self._native.state_dict()
        return state

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Loads a state: the next ``iter(loader)`` resumes from it. A state of
        another pipeline, or a damaged one, is a ``ValueError`` now."""
        self._native.load_state_dict(state_dict)

    def load_resharded(
        self, states: List[Dict[str, Any]], rank: int, world_size: int, batch_sizes: str = "per_rank"
    ) -> None:
        """Loads this loader's share, as rank ``rank`` of ``world_size``, of the
        rest of the epoch that a job's ranks (any number) saved as ``states``;
        ``batch_sizes`` as for ``nodes_rs.reshard``."""
        self._native.load_resharded(states, rank, world_size, batch_sizes)

    def check_elastic(self) -> None:
        """Raises ``ValueError`` naming the node if this pipeline's states
        cannot be resharded to another number of ranks."""
        self._native.check_elastic()

    def stats(self) -> Optional[List[Dict[str, Any]]]:
        """Per-node statistics, a dict per node (``node``, ``name``, ``items``,
        ``calls``, ``self_time_s``, ``blocked_s``, queue depths, ``skipped``),
        or ``None`` unless the loader was made with ``record_stats=True``."""
        rows: Optional[List[Dict[str, Any]]] = self._native.stats()
        return rows

    def describe(self) -> str:
        """The pipeline's shape: each node, its parameters and its sources."""
        text: str = self._native.describe()
        return text

    def shutdown(self) -> None:
        """Stops the pipeline's worker threads."""
        self._native.shutdown()


class LoaderIterator(Iterator[T]):
    """The items of the loader's current epoch."""

    def __init__(self, loader: Loader[T]) -> None:
        self.loader = loader

    def __iter__(self) -> "LoaderIterator[T]":
        return self

    def __next__(self) -> T:
        item: T = self.loader._native.next()
        return item

    def state_dict(self) -> Dict[str, Any]:
        """The loader's state."""
        return self.loader.state_dict()


__all__ = ["Loader", "LoaderIterator"]
