"""Batcher, Unbatcher, Filter, Header, Cycler and Mapper."""

from typing import Any, Dict, List

import pytest

import nodes_rs.torchdata as tn
from conftest import CountingRange, save_load_round_trip


def rows(n: int) -> tn.BaseNode[Dict[str, Any]]:
    return tn.IterableWrapper([{"step": i, "text": f"str_{i}"} for i in range(n)])


def test_batcher_drops_the_short_last_batch() -> None:
    batches = list(tn.Batcher(rows(20), batch_size=6))
    assert [len(b) for b in batches] == [6, 6, 6]
    assert [r["step"] for b in batches for r in b] == list(range(18))


def test_batcher_keeps_the_short_last_batch() -> None:
    batches = list(tn.Batcher(rows(20), batch_size=6, drop_last=False))
    assert [len(b) for b in batches] == [6, 6, 6, 2]
    assert [r["step"] for b in batches for r in b] == list(range(20))


def test_batcher_refuses_a_batch_size_of_zero() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        tn.Batcher(rows(3), batch_size=0)


@pytest.mark.parametrize("midpoint", [0, 2])
@pytest.mark.parametrize("drop_last", [True, False])
def test_batcher_resumes(midpoint: int, drop_last: bool) -> None:
    save_load_round_trip(lambda: tn.Batcher(rows(20), 6, drop_last=drop_last), midpoint)


def test_unbatcher_restores_the_items() -> None:
    items = list(tn.Unbatcher(tn.Batcher(rows(20), 6, drop_last=False)))
    assert [r["step"] for r in items] == list(range(20))


@pytest.mark.parametrize("midpoint", [0, 2])
@pytest.mark.parametrize("drop_last", [True, False])
def test_unbatcher_resumes(midpoint: int, drop_last: bool) -> None:
    save_load_round_trip(lambda: tn.Unbatcher(tn.Batcher(rows(20), 6, drop_last=drop_last)), midpoint)


def test_filter_counts_kept_and_dropped() -> None:
    node = tn.Filter(tn.IterableWrapper(range(10)), lambda x: x % 2 == 0)
    assert list(node) == [0, 2, 4, 6, 8]
    assert (node.num_yielded, node.num_filtered) == (5, 5)
    node = tn.Filter(tn.IterableWrapper(range(10)), lambda x: x > 5)
    assert list(node) == [6, 7, 8, 9]
    assert (node.num_yielded, node.num_filtered) == (4, 6)


def test_filter_over_rows_two_epochs() -> None:
    node = tn.Filter(rows(20), lambda r: r["step"] % 3 == 0)
    for _ in range(2):
        node.reset()
        assert [r["step"] for r in node] == [0, 3, 6, 9, 12, 15, 18]
        assert (node.num_yielded, node.num_filtered) == (7, 13)


def test_filter_that_keeps_nothing() -> None:
    node = tn.Filter(tn.IterableWrapper(range(10)), lambda x: False)
    assert list(node) == []
    assert (node.num_yielded, node.num_filtered) == (0, 10)


@pytest.mark.parametrize("midpoint", [0, 3, 7])
def test_filter_resumes(midpoint: int) -> None:
    save_load_round_trip(lambda: tn.Filter(CountingRange(50), lambda r: r["i"] % 3 == 0), midpoint)


def test_filter_restored_from_its_own_state_keeps_its_counters() -> None:
    node = tn.Filter(tn.IterableWrapper(range(10)), lambda x: x % 2 == 0)
    assert [next(node), next(node)] == [0, 2]
    assert (node.num_yielded, node.num_filtered) == (2, 1)
    node.reset(node.state_dict())
    assert (node.num_yielded, node.num_filtered) == (2, 1)
    assert [next(node) for _ in range(3)] == [4, 6, 8]
    assert (node.num_yielded, node.num_filtered) == (5, 4)
    assert list(node) == []
    assert (node.num_yielded, node.num_filtered) == (5, 5)


def test_filter_over_batches() -> None:
    node = tn.Filter(tn.Batcher(tn.IterableWrapper(range(20)), 4), lambda b: sum(b) % 10 == 0)
    assert list(node) == [[16, 17, 18, 19]]
    assert (node.num_yielded, node.num_filtered) == (1, 4)


def test_filter_counters_start_again_on_reset() -> None:
    node = tn.Filter(tn.IterableWrapper(range(10)), lambda x: x % 2 == 0)
    list(node)
    assert (node.num_yielded, node.num_filtered) == (5, 5)
    node.reset()
    assert (node.num_yielded, node.num_filtered) == (0, 0)
    next(node), next(node)
    assert (node.num_yielded, node.num_filtered) == (2, 1)


@pytest.mark.parametrize("n, size, expected", [(5, 10, 5), (10, 3, 3), (0, 10, 0)])
def test_header_takes_at_most_n(n: int, size: int, expected: int) -> None:
    node = tn.Header(tn.IterableWrapper(range(size)), n)
    assert list(node) == list(range(expected))
    assert node.num_yielded == expected


def test_header_over_rows_two_epochs() -> None:
    node = tn.Header(rows(20), 7)
    for _ in range(2):
        node.reset()
        assert [r["step"] for r in node] == list(range(7))
        assert node.num_yielded == 7


def test_header_over_an_empty_source() -> None:
    node: tn.Header[Any] = tn.Header(tn.IterableWrapper([]), 5)
    assert list(node) == [] and node.num_yielded == 0


@pytest.mark.parametrize("midpoint", [0, 3, 7])
def test_header_resumes(midpoint: int) -> None:
    save_load_round_trip(lambda: tn.Header(CountingRange(50), 20), midpoint)


def test_header_restored_from_its_own_state() -> None:
    node = tn.Header(tn.IterableWrapper(range(10)), 5)
    assert [next(node), next(node)] == [0, 1]
    node.reset(node.state_dict())
    assert node.num_yielded == 2
    assert list(node) == [2, 3, 4] and node.num_yielded == 5


def test_header_counter_starts_again_on_reset() -> None:
    node = tn.Header(tn.IterableWrapper(range(10)), 5)
    list(node)
    node.reset()
    assert node.num_yielded == 0
    next(node), next(node)
    assert node.num_yielded == 2


def test_header_refuses_a_negative_n() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        tn.Header(tn.IterableWrapper(range(3)), -1)


def test_cycler_wraps_around() -> None:
    node = tn.Cycler(tn.IterableWrapper(range(5)))
    assert [next(node) for _ in range(12)] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    assert node.num_cycles == 2


def test_cycler_over_rows() -> None:
    node = tn.Cycler(rows(3))
    assert [next(node)["step"] for _ in range(8)] == [0, 1, 2, 0, 1, 2, 0, 1]
    assert node.num_cycles == 2


def test_cycler_over_an_empty_source_ends() -> None:
    node: tn.Cycler[Any] = tn.Cycler(tn.IterableWrapper([]))
    with pytest.raises(StopIteration):
        next(node)
    assert node.num_cycles == 0


def test_cycler_restored_from_its_own_state() -> None:
    node = tn.Cycler(tn.IterableWrapper(range(3)))
    assert [next(node) for _ in range(4)] == [0, 1, 2, 0]
    assert node.num_cycles == 1
    node.reset(node.state_dict())
    assert node.num_cycles == 1
    assert [next(node) for _ in range(3)] == [1, 2, 0]
    assert node.num_cycles == 2


def test_cycler_counter_starts_again_on_reset() -> None:
    node = tn.Cycler(tn.IterableWrapper(range(3)))
    [next(node) for _ in range(7)]
    assert node.num_cycles == 2
    node.reset()
    assert node.num_cycles == 0
    [next(node) for _ in range(3)]
    assert node.num_cycles == 0
    next(node)
    assert node.num_cycles == 1


@pytest.mark.parametrize("midpoint", [0, 3, 7])
def test_cycler_resumes(midpoint: int) -> None:
    save_load_round_trip(lambda: tn.Cycler(CountingRange(50), max_cycles=2), midpoint)


@pytest.mark.parametrize("midpoint", [0, 3, 7])
def test_cycler_under_a_prefetcher_resumes(midpoint: int) -> None:
    save_load_round_trip(lambda: tn.Prefetcher(tn.Cycler(CountingRange(50), max_cycles=1), 2), midpoint)


def test_cycler_with_max_cycles_ends() -> None:
    node = tn.Cycler(tn.IterableWrapper(range(3)), max_cycles=2)
    assert list(node) == [0, 1, 2, 0, 1, 2]
    assert node.num_cycles == 2
    with pytest.raises(StopIteration):
        next(node)


def test_cycler_refuses_max_cycles_below_one() -> None:
    with pytest.raises(ValueError, match="max_cycles"):
        tn.Cycler(tn.IterableWrapper(range(3)), max_cycles=0)


def test_mapper_over_rows() -> None:
    node = tn.Mapper(rows(10), lambda r: r["step"] * 2)
    assert list(node) == [2 * i for i in range(10)]


def test_an_exception_in_map_fn_reaches_the_caller_as_itself_and_ends_the_pass() -> None:
    class Boom(Exception):
        pass

    def explode(x: int) -> int:
        if x == 3:
            raise Boom(f"bad item {x}")
        return x

    node = tn.Mapper(tn.IterableWrapper(range(10)), explode)
    seen: List[int] = []
    with pytest.raises(Boom, match="bad item 3") as raised:
        for x in node:
            seen.append(x)
    assert seen == [0, 1, 2]
    assert list(node) == []
    notes = getattr(raised.value, "__notes__", [])
    assert any("TryMapper" in note for note in notes) or not hasattr(raised.value, "add_note")
    node.reset()
    with pytest.raises(Boom):
        list(node)


def test_cycler_under_a_prefetcher_reads_ahead_within_bounds() -> None:
    node = tn.Prefetcher(tn.Cycler(tn.IterableWrapper(range(5))), 3)
    assert [next(node) for _ in range(12)] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]


def test_a_state_of_another_max_cycles_is_refused_by_the_loader() -> None:
    """torchdata adopts the saved ``max_cycles`` over the constructor's; here a
    state belongs to its pipeline's configuration, and a Loader refuses it."""
    loader = tn.Loader(tn.Cycler(tn.IterableWrapper(range(3)), max_cycles=2))
    it = iter(loader)
    [next(it) for _ in range(4)]
    saved = loader.state_dict()
    other = tn.Loader(tn.Cycler(tn.IterableWrapper(range(3)), max_cycles=5))
    with pytest.raises(ValueError, match=r"max_cycles=Some\(2\).*max_cycles=Some\(5\)"):
        other.load_state_dict(saved)
    same = tn.Loader(tn.Cycler(tn.IterableWrapper(range(3)), max_cycles=2))
    same.load_state_dict(saved)
    assert list(same) == [1, 2]
