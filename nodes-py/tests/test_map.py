"""ParallelMapper and Prefetcher: order, errors, resume, shutdown."""

import importlib.util
import random
import threading
from typing import Any, Dict, List, Optional

import pytest

import nodes_rs.torchdata as tn
from conftest import CountingRange, save_load_round_trip
from test_transforms import rows


def raises(x: Any) -> Any:
    raise ValueError("test exception")


class Scrambled:
    """The identity, slowed by a seeded amount of busy work per item so that
    workers finish out of order (no sleep: the order is what varies)."""

    def __init__(self) -> None:
        self.rng = random.Random(0)
        self.lock = threading.Lock()

    def __call__(self, x: Any) -> Any:
        with self.lock:
            spins = self.rng.randrange(2000)
        total = 0
        for i in range(spins):
            total += i
        return x


def test_an_exception_through_threaded_and_inline_maps() -> None:
    mapped = tn.ParallelMapper(tn.Batcher(rows(20), 6), raises, num_workers=2)
    node = tn.Prefetcher(tn.Mapper(mapped, raises), 2)
    with pytest.raises(ValueError, match="test exception"):
        list(node)


@pytest.mark.parametrize("in_order", [True, False])
@pytest.mark.parametrize("prebatch", [None, 3])
def test_threads_in_and_out_of_order(in_order: bool, prebatch: Optional[int]) -> None:
    batches = tn.Batcher(rows(80), 6, drop_last=False)
    mapped = tn.ParallelMapper(batches, Scrambled(), 4, in_order=in_order, prebatch=prebatch)
    node = tn.Prefetcher(mapped, 2)
    for _ in range(2):
        node.reset()
        steps = [r["step"] for batch in node for r in batch]
        assert len(steps) == 80
        if in_order:
            assert steps == list(range(80))
        else:
            assert sorted(steps) == list(range(80))


@pytest.mark.parametrize("midpoint", [0, 7, 13])
@pytest.mark.parametrize("snapshot_frequency", [0, 1, 9])
@pytest.mark.parametrize("prebatch", [None, 3])
def test_threads_resume(midpoint: int, snapshot_frequency: int, prebatch: Optional[int]) -> None:
    def make() -> tn.BaseNode[Any]:
        batches = tn.Batcher(CountingRange(80), 6, drop_last=False)
        mapped = tn.ParallelMapper(
            batches, Scrambled(), 4, snapshot_frequency=snapshot_frequency, prebatch=prebatch
        )
        return tn.Prefetcher(mapped, 2)

    save_load_round_trip(make, midpoint)


def test_bad_arguments_are_value_errors() -> None:
    with pytest.raises(ValueError, match="method"):
        tn.ParallelMapper(rows(3), raises, 2, method="fiber")
    with pytest.raises(ValueError, match="max_concurrent=3 should be <= num_workers=2"):
        tn.ParallelMapper(rows(3), raises, 2, max_concurrent=3)
    with pytest.raises(ValueError, match="prebatch"):
        tn.ParallelMapper(rows(3), raises, 2, prebatch=0)
    with pytest.raises(ValueError, match="prefetch_factor"):
        tn.Prefetcher(rows(3), 0)


class Closable(tn.BaseNode[int]):
    """A source that counts ``shutdown`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.i = 0
        self.shutdowns = 0

    def reset(self, initial_state: Optional[Dict[str, Any]] = None) -> None:
        super().reset(initial_state)
        self.i = initial_state["i"] if initial_state else 0

    def next(self) -> int:
        self.i += 1
        return self.i

    def get_state(self) -> Dict[str, Any]:
        return {"i": self.i}

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.mark.parametrize("threaded", ["map", "prefetch"])
def test_shutdown_reaches_the_source_once(threaded: str) -> None:
    source = Closable()
    node: tn.BaseNode[int]
    if threaded == "map":
        node = tn.ParallelMapper(source, lambda x: x, 2)
    else:
        node = tn.Prefetcher(source, 2)
    node.reset()
    assert next(node) == 1
    node.shutdown()
    assert source.shutdowns == 1


def test_a_dropped_threaded_node_stops_its_threads() -> None:
    node = tn.ParallelMapper(rows(10), lambda r: r, 2)
    got = [next(node) for _ in range(5)]
    assert [r["step"] for r in got] == list(range(5))
    before = threading.active_count()
    del node
    assert threading.active_count() <= before


def test_prefetcher_two_epochs() -> None:
    node = tn.Prefetcher(tn.Batcher(rows(20), 6), 2)
    for _ in range(2):
        node.reset()
        batches = list(node)
        assert [[r["step"] for r in b] for b in batches] == [list(range(i, i + 6)) for i in (0, 6, 12)]


class FailsToStart(tn.BaseNode[int]):
    def reset(self, initial_state: Optional[Dict[str, Any]] = None) -> None:
        super().reset(initial_state)
        raise ValueError("Iter Init Error")

    def next(self) -> int:
        raise ValueError("never reached")

    def get_state(self) -> Dict[str, Any]:
        return {}


def test_an_error_in_reset_reaches_the_caller() -> None:
    node = tn.Prefetcher(FailsToStart(), 2)
    with pytest.raises(ValueError, match="Iter Init Error"):
        list(node)
    with pytest.raises(ValueError, match="failed to start"):
        node.reset()


@pytest.mark.parametrize("midpoint", [0, 7, 32])
@pytest.mark.parametrize("snapshot_frequency", [0, 1, 9])
def test_prefetcher_resumes(midpoint: int, snapshot_frequency: int) -> None:
    save_load_round_trip(
        lambda: tn.Prefetcher(
            tn.Batcher(CountingRange(200), 6, drop_last=False), 8, snapshot_frequency
        ),
        midpoint,
    )


def test_pin_memory_without_torch_names_torch() -> None:
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed: this checks the message without it")
    with pytest.raises(ImportError, match="torch"):
        tn.PinMemory(rows(3))
