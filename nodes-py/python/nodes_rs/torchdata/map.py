"""``ParallelMapper`` and ``Mapper``: a callable over every item."""

import multiprocessing
import threading
import weakref
from typing import Any, Callable, Optional, TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source

T = TypeVar("T")
X = TypeVar("X")


class _Default(int):
    """An int default that can be told from the same value passed explicitly."""


# torchdata snapshots a threaded node's source after every item; the Rust
# nodes pace their snapshots by the source's work instead, unless a
# frequency is passed explicitly.
DEFAULT_SNAPSHOT_FREQUENCY = _Default(1)


def explicit(value: int) -> Optional[int]:
    """``value`` if the caller passed it, ``None`` for the default."""
    return None if isinstance(value, _Default) else int(value)


class ParallelMapper(NativeNode[T]):
    """``map_fn`` over every item, on ``num_workers`` threads (inline for 0).

    In order by default. Like torchdata, an exception from ``map_fn`` reaches
    the caller as itself and ends the pass. ``method="process"`` runs
    ``map_fn`` in ``num_workers`` worker processes (started by
    ``multiprocessing_context``: ``"spawn"``, ``"forkserver"``, or the
    platform's default), so ``map_fn`` and the items must pickle; order,
    errors and states are the same as with threads.
    """

    def __init__(
        self,
        source: BaseNode[X],
        map_fn: Callable[[X], T],
        num_workers: int,
        in_order: bool = True,
        method: str = "thread",
        multiprocessing_context: Optional[str] = None,
        max_concurrent: Optional[int] = None,
        snapshot_frequency: int = DEFAULT_SNAPSHOT_FREQUENCY,
        prebatch: Optional[int] = None,
    ) -> None:
        super().__init__()
        if method not in ("thread", "process"):
            raise ValueError(f"method must be 'thread' or 'process', not {method!r}")
        if max_concurrent is not None and num_workers > 0 and max_concurrent > num_workers:
            raise ValueError(f"max_concurrent={max_concurrent} should be <= num_workers={num_workers}!")
        if max_concurrent is not None and max_concurrent <= 0:
            raise ValueError(f"max_concurrent={max_concurrent} must be a positive integer!")
        if prebatch is not None and prebatch <= 0:
            raise ValueError(f"prebatch={prebatch} must be a positive integer!")
        self.source = source
        self.map_fn = map_fn
        self.num_workers = num_workers
        self.in_order = in_order
        self._processes: Optional[ProcessMap] = None
        if method == "process" and num_workers > 0:
            self._processes = ProcessMap(map_fn, num_workers, multiprocessing_context)
            map_fn = self._processes
        if num_workers <= 0:
            fn = _each(map_fn) if prebatch is not None else map_fn
            mapped = _native.map(native_source(_batched(source, prebatch) if prebatch else source), fn)
            self._native = _native.unbatch(mapped) if prebatch is not None else mapped
        else:
            self._native = _native.par_map(
                native_source(source),
                map_fn,
                num_workers,
                in_order,
                max_concurrent,
                _frequency(explicit(snapshot_frequency)),
                prebatch,
            )

    def shutdown(self) -> None:
        super().shutdown()
        if self._processes is not None:
            self._processes.shutdown()


class ProcessMap:
    """``map_fn`` run in a pool of worker processes: each call waits (without
    the GIL) for one worker to map one item. The pool starts at the first
    call, in the process that iterates, and stops with the node."""

    def __init__(self, map_fn: Callable[[Any], Any], processes: int, context: Optional[str]) -> None:
        self.map_fn = map_fn
        self.processes = processes
        self.context = context
        self._pool: Optional[Any] = None
        self._lock = threading.Lock()
        self._finalizer: Optional["weakref.finalize[Any, Any]"] = None

    def __call__(self, item: Any) -> Any:
        return self.pool().apply(self.map_fn, (item,))

    def pool(self) -> Any:
        with self._lock:
            if self._pool is None:
                pool = multiprocessing.get_context(self.context).Pool(self.processes)
                self._pool = pool
                self._finalizer = weakref.finalize(self, _terminate_apart, pool)
            return self._pool

    def shutdown(self) -> None:
        """Stops the worker processes; the next call starts new ones."""
        with self._lock:
            if self._finalizer is not None and self._finalizer.detach() is not None:
                assert self._pool is not None
                self._pool.terminate()  # here, on the caller's thread: it waits
            self._pool = None
            self._finalizer = None


def _terminate_apart(pool: Any) -> None:
    """Terminates ``pool`` on a thread of its own: a finalizer runs wherever
    the garbage collector does (maybe on a pipeline's worker thread), and a
    pool's termination waits on its own threads and queues."""
    threading.Thread(target=pool.terminate, name="nodes-pool-reaper", daemon=True).start()


def _frequency(snapshot_frequency: Optional[int]) -> Optional[int]:
    """torchdata's 0 (a snapshot only at the start of a pass) as the Rust
    nodes say it: a frequency no pass reaches."""
    return 2**32 if snapshot_frequency == 0 else snapshot_frequency


def _each(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda batch: [fn(x) for x in batch]


def _batched(source: BaseNode[Any], n: int) -> Any:
    from nodes_rs.torchdata.batch import Batcher

    return Batcher(source, n, drop_last=False)


def Mapper(source: BaseNode[X], map_fn: Callable[[X], T]) -> "ParallelMapper[T]":
    """``map_fn`` over every item, on the caller's thread."""
    return ParallelMapper(source, map_fn, num_workers=0)


__all__ = ["Mapper", "ParallelMapper"]
