"""torchdata's snapshot store, for programs that import it. The Rust threaded
nodes keep their snapshots themselves and do not use it."""

import queue
import threading
import time
from typing import Any, Optional, Protocol, Tuple

from nodes_rs.torchdata.constants import QUEUE_TIMEOUT
from nodes_rs.torchdata.exception_wrapper import ExceptionWrapper


class MonotonicIndex:
    """A counter: ``get()`` returns the current value and moves it on by one."""

    def __init__(self, initial: int = 0) -> None:
        self._value = initial
        self._lock = threading.Lock()

    def get(self) -> int:
        with self._lock:
            value = self._value
            self._value += 1
            return value


class SnapshotStore(Protocol):
    """Where a worker leaves versioned snapshots of its source."""

    def append(self, snapshot: Any, version: int) -> None: ...

    def pop_version(self, version: int) -> Optional[Any]: ...

    def append_initial_snapshot(self, snapshot: Any) -> None: ...

    def get_initial_snapshot(self, thread: Any, timeout: float) -> Any: ...


class QueueSnapshotStore:
    """A first-in first-out store of ``(version, snapshot)``, versions strictly
    increasing."""

    SNAPSHOT_INIT_VERSION = -1

    def __init__(self) -> None:
        self._queue: "queue.Queue[Tuple[int, Any]]" = queue.Queue()
        self._lock = threading.Lock()
        self._max_version = -1000

    def append(self, snapshot: Any, version: int) -> None:
        with self._lock:
            if version <= self._max_version:
                raise ValueError(f"{version=} is not strictly greater than {self._max_version=}")
            self._max_version = version
            self._queue.put((version, snapshot))

    def append_initial_snapshot(self, snapshot: Any) -> None:
        self.append(snapshot, self.SNAPSHOT_INIT_VERSION)

    def pop_version(self, version: int) -> Optional[Any]:
        """Removes every snapshot up to ``version``; the one at ``version``, if
        it was stored."""
        found: Optional[Tuple[int, Any]] = None
        with self._lock:
            while not self._queue.empty() and self._queue.queue[0][0] <= version:
                found = self._queue.get_nowait()
        if found is not None and found[0] == version:
            return found[1]
        return None

    def get_initial_snapshot(self, thread: Any, timeout: float = 60.0) -> Any:
        """The initial snapshot, waiting up to ``timeout`` seconds while the
        worker lives; a wrapped exception from it is raised."""
        deadline = time.monotonic() + timeout
        entry: Optional[Tuple[int, Any]] = None
        while entry is None and time.monotonic() < deadline:
            try:
                entry = self._queue.get(timeout=QUEUE_TIMEOUT)
            except queue.Empty:
                if not _alive(thread):
                    break
        if entry is not None and isinstance(entry[1], ExceptionWrapper):
            entry[1].reraise()
        if entry is None or entry[0] != self.SNAPSHOT_INIT_VERSION:
            alive = _alive(thread)
            raise RuntimeError(
                f"Failed to get initial snapshot after {timeout} seconds! thread.is_alive()={alive}"
            )
        return entry[1]


def _alive(worker: Any) -> bool:
    """Whether a worker thread (or a pool's future) is still running."""
    return bool(worker.is_alive() if hasattr(worker, "is_alive") else worker.running())


__all__ = ["MonotonicIndex", "QueueSnapshotStore", "SnapshotStore"]
