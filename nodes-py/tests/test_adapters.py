"""Sources from Python objects: IterableWrapper, SamplerWrapper, MapStyleWrapper."""

import random
from typing import Any, Dict, Iterator, List

import pytest

import nodes_rs.torchdata as tn
from conftest import ResumableRange, save_load_round_trip


class Rows:
    """An iterable dataset of dict rows."""

    def __init__(self, n: int, name: str = "rows") -> None:
        self.n, self.name = n, name

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for i in range(self.n):
            yield {"name": self.name, "step": i, "text": f"str_{i}"}

    def __getitem__(self, i: int) -> Dict[str, Any]:
        return {"name": self.name, "step": i, "text": f"str_{i}"}

    def __len__(self) -> int:
        return self.n


class Shuffled:
    """A sampler: a seeded permutation of range(n), new each epoch."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        order = list(range(self.n))
        random.Random(self.seed * 1000 + self.epoch).shuffle(order)
        return iter(order)


class Strided:
    """A sampler of every ``world``-th index from ``rank``, shuffled by epoch
    (a DistributedSampler without torch)."""

    def __init__(self, n: int, rank: int, world: int) -> None:
        self.n, self.rank, self.world, self.epoch = n, rank, world, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        order = list(range(self.n))
        random.Random(self.epoch).shuffle(order)
        return iter(order[self.rank :: self.world])


def test_iterable_two_epochs() -> None:
    node = tn.IterableWrapper(range(20))
    for _ in range(2):
        node.reset()
        assert list(node) == list(range(20))


def test_one_shot_generator_is_empty_on_the_second_pass() -> None:
    node = tn.IterableWrapper(f"str_{i}" for i in range(20))
    assert list(node) == [f"str_{i}" for i in range(20)]
    node.reset()
    assert list(node) == []


def test_iterable_dataset_rows_in_order() -> None:
    node = tn.IterableWrapper(Rows(20))
    for _ in range(2):
        node.reset()
        rows = list(node)
        assert [r["step"] for r in rows] == list(range(20))
        assert all(r["text"] == f"str_{r['step']}" for r in rows)


@pytest.mark.parametrize("midpoint", [0, 5])
def test_iterable_resumes_by_fast_forward(midpoint: int) -> None:
    save_load_round_trip(lambda: tn.IterableWrapper(range(10)), midpoint)


@pytest.mark.parametrize("midpoint", [0, 5])
def test_iterable_resumes_from_its_own_state(midpoint: int) -> None:
    save_load_round_trip(lambda: tn.IterableWrapper(ResumableRange(10)), midpoint)


def test_fast_forward_past_the_end_is_a_named_error() -> None:
    node = tn.IterableWrapper(range(3))
    with pytest.raises(ValueError, match="fast-forwarded 7 items but the iterable ended after 3"):
        node.reset({"num_yielded": 7})


def test_map_style_default_sampler() -> None:
    node: tn.BaseNode[Any] = tn.MapStyleWrapper(Rows(20), sampler=range(20))
    for _ in range(2):
        node.reset()
        assert [r["step"] for r in node] == list(range(20))


def test_map_style_random_sampler_permutes_each_epoch() -> None:
    node: tn.BaseNode[Any] = tn.MapStyleWrapper(Rows(20), sampler=Shuffled(20))
    epochs: List[List[int]] = []
    for _ in range(2):
        node.reset()
        epochs.append([r["step"] for r in node])
    assert all(sorted(e) == list(range(20)) for e in epochs)
    assert epochs[0] != epochs[1]


def test_map_style_dict_with_key_sampler() -> None:
    data = {f"i{i}": {"step": i} for i in range(20)}
    node = tn.MapStyleWrapper(data, sampler=list(data))
    assert [r["step"] for r in node] == list(range(20))


@pytest.mark.parametrize("midpoint", [0, 7])
def test_map_style_resumes_by_fast_forward(midpoint: int) -> None:
    save_load_round_trip(lambda: tn.MapStyleWrapper(Rows(20), sampler=range(20)), midpoint)


@pytest.mark.parametrize("midpoint", [0, 7])
def test_map_style_resumes_from_the_samplers_state(midpoint: int) -> None:
    save_load_round_trip(lambda: tn.MapStyleWrapper(Rows(20), sampler=ResumableRange(20)), midpoint)


def test_sampler_wrapper_counts_epochs() -> None:
    node = tn.SamplerWrapper(Shuffled(20))
    epochs = []
    for expected in range(2):
        node.reset()
        assert node.epoch == expected
        epochs.append(list(node))
    assert all(sorted(e) == list(range(20)) for e in epochs)
    assert epochs[0] != epochs[1]


def test_sampler_wrapper_sets_the_samplers_epoch() -> None:
    node = tn.SamplerWrapper(Strided(40, rank=1, world=2))
    reference = Strided(40, rank=1, world=2)
    for epoch in range(4):
        node.reset()
        reference.set_epoch(epoch)
        assert list(node) == list(reference)


@pytest.mark.parametrize("midpoint", [0, 7])
def test_sampler_wrapper_resumes(midpoint: int) -> None:
    save_load_round_trip(lambda: tn.SamplerWrapper(Strided(20, rank=1, world=2)), midpoint)


@pytest.mark.parametrize("midpoint", [0, 7])
def test_sampler_wrapper_resumes_with_an_epoch_updater(midpoint: int) -> None:
    save_load_round_trip(
        lambda: tn.SamplerWrapper(
            Strided(20, rank=1, world=2), initial_epoch=2, epoch_updater=lambda e: e + 5
        ),
        midpoint,
    )


def test_an_empty_pass_still_moves_the_epoch_on() -> None:
    node: tn.SamplerWrapper[Any] = tn.SamplerWrapper([])
    node.reset()
    assert list(node) == []
    node.reset()
    assert node.epoch == 1
