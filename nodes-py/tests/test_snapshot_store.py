"""torchdata's snapshot store, kept for programs that import it."""

import threading

import pytest

from nodes_rs.torchdata.exception_wrapper import StartupExceptionWrapper
from nodes_rs.torchdata.snapshot_store import QueueSnapshotStore


def test_versions_pop_in_order_and_only_increase() -> None:
    store = QueueSnapshotStore()
    store.append({"v": 0}, 0)
    store.append({"v": 10}, 10)
    assert store.pop_version(0) == {"v": 0}
    assert store.pop_version(1) is None
    assert store.pop_version(7) is None
    assert store.pop_version(10) == {"v": 10}
    assert store.pop_version(11) is None
    for stale in (3, 10):
        with pytest.raises(ValueError, match="is not strictly greater than"):
            store.append({}, stale)
    store.append({"v": 11}, 11)
    store.append({"v": 19}, 19)
    assert store.pop_version(19) == {"v": 19}
    assert store.pop_version(11) is None


def test_a_startup_error_is_raised() -> None:
    store = QueueSnapshotStore()

    def fail() -> None:
        try:
            raise RuntimeError("Test Startup Exception")
        except RuntimeError:
            store.append_initial_snapshot(StartupExceptionWrapper(where="in startup"))

    worker = threading.Thread(target=fail)
    worker.start()
    worker.join()
    with pytest.raises(RuntimeError, match="Test Startup Exception"):
        store.get_initial_snapshot(worker, timeout=10)


def test_a_dead_worker_without_a_snapshot() -> None:
    store = QueueSnapshotStore()
    worker = threading.Thread(target=lambda: None)
    worker.start()
    worker.join()
    with pytest.raises(RuntimeError, match=r"thread.is_alive\(\)=False"):
        store.get_initial_snapshot(worker, timeout=10)


def test_no_snapshot_within_the_timeout() -> None:
    """A zero timeout: the live worker has appended nothing, so the wait ends
    at once (no clock is waited on)."""
    store = QueueSnapshotStore()
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        with pytest.raises(RuntimeError, match=r"Failed to get initial snapshot.*is_alive\(\)=True"):
            store.get_initial_snapshot(worker, timeout=0)
    finally:
        release.set()
        worker.join()
