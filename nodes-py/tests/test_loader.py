"""Loader: the state it reports after a restore, and torchdata's Loader bugs
(spec §8), done right."""

from typing import Any, Dict, Iterator, List, Optional

import pytest

import nodes_rs.torchdata as tn
from conftest import ResumableRange
from test_adapters import Rows


def check_state_after_restore(make: Any, midpoint: int = 5) -> None:
    """After a whole epoch, take ``midpoint`` items of the next, save, load,
    iterate: the reported state is the loaded one, and the rest matches."""
    loader = tn.Loader(make())
    first = list(loader)
    it = iter(loader)
    [next(it) for _ in range(midpoint)]
    saved = loader.state_dict()
    loader.load_state_dict(saved)
    it = iter(loader)
    assert loader.state_dict() == saved
    rest = [next(it) for _ in range(len(first) - midpoint)]
    assert rest == first[midpoint:]


def test_state_after_restore_iterable() -> None:
    check_state_after_restore(lambda: tn.IterableWrapper(Rows(10)))


def test_state_after_restore_stateful_iterable() -> None:
    check_state_after_restore(lambda: tn.IterableWrapper(ResumableRange(10)))


def test_state_after_restore_map_style() -> None:
    check_state_after_restore(lambda: tn.MapStyleWrapper(Rows(10), sampler=range(10)))


def test_a_restart_from_an_end_state_reports_the_new_epochs_state() -> None:
    """Bug 1: torchdata keeps reporting the end state through the next epoch."""
    loader = tn.Loader(tn.IterableWrapper(range(5)))
    list(loader)
    end = loader.state_dict()
    fresh = tn.Loader(tn.IterableWrapper(range(5)))
    fresh.load_state_dict(end)
    it = iter(fresh)
    assert [next(it), next(it)] == [0, 1]
    mid = fresh.state_dict()
    again = tn.Loader(tn.IterableWrapper(range(5)))
    again.load_state_dict(mid)
    assert list(again) == [2, 3, 4]


def test_a_state_loaded_after_an_early_state_dict_is_used() -> None:
    """Bug 2: torchdata ignores it for one ``iter()``."""
    source = tn.Loader(tn.IterableWrapper(range(6)))
    it = iter(source)
    [next(it) for _ in range(4)]
    saved = source.state_dict()
    loader = tn.Loader(tn.IterableWrapper(range(6)))
    loader.state_dict()
    loader.load_state_dict(saved)
    assert list(loader) == [4, 5]


def test_none_items_do_not_end_the_epoch() -> None:
    """Bug 3: torchdata's look-ahead takes a ``None`` item for the end."""
    items: List[Optional[int]] = [0, None, 2, None]
    loader = tn.Loader(tn.IterableWrapper(items))
    it = iter(loader)
    next(it)
    saved = loader.state_dict()
    resumed = tn.Loader(tn.IterableWrapper(items))
    resumed.load_state_dict(saved)
    assert list(resumed) == [None, 2, None]


class EpochSampler:
    """A sampler with its own state whose order depends on its epoch."""

    def __init__(self) -> None:
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        start, self.start = self.start, 0
        return iter([self.epoch * 100 + i for i in range(start, 5)])

    def state_dict(self) -> Dict[str, int]:
        return {"start": 0}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.start = state["start"]


def test_a_restored_stateful_sampler_gets_its_epoch() -> None:
    """Bug 6: torchdata does not call ``set_epoch`` when it restores a
    sampler that has its own state."""
    loader = tn.Loader(tn.SamplerWrapper(EpochSampler()))
    list(loader)
    it = iter(loader)
    assert next(it) == 100
    saved = loader.state_dict()
    resumed = tn.Loader(tn.SamplerWrapper(EpochSampler()))
    resumed.load_state_dict(saved)
    assert next(iter(resumed)) == 100


def test_a_state_of_another_pipeline_is_refused_at_once() -> None:
    loader = tn.Loader(tn.Batcher(tn.IterableWrapper(range(10)), 2))
    saved = loader.state_dict()
    other = tn.Loader(tn.Header(tn.IterableWrapper(range(10)), 3))
    with pytest.raises(ValueError, match="Batcher|Header"):
        other.load_state_dict(saved)
    assert list(other) == [0, 1, 2]


def test_an_edited_state_is_refused() -> None:
    loader = tn.Loader(tn.IterableWrapper(range(10)))
    it = iter(loader)
    next(it)
    saved = loader.state_dict()
    saved["root"]["num_yielded"] = 7
    with pytest.raises(ValueError):
        tn.Loader(tn.IterableWrapper(range(10))).load_state_dict(saved)
