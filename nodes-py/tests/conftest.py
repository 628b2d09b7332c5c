"""Fixtures shared by the tests: sources that make resets and positions
visible in their items, and the save/load round trip every node must pass."""

import collections
import json
import pickle
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import nodes_rs.torchdata as tn


class CountingRange(tn.BaseNode[Dict[str, int]]):
    """``{"i": i, "resets": r}`` for i < n, where r counts fresh resets, so an
    extra or missing reset shows in the items."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.i = 0
        self.resets = 0

    def reset(self, initial_state: Optional[Dict[str, Any]] = None) -> None:
        super().reset(initial_state)
        if initial_state is None:
            self.i = 0
            self.resets += 1
        else:
            self.i = initial_state["i"]
            self.resets = initial_state["resets"]

    def next(self) -> Dict[str, int]:
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return {"i": self.i - 1, "resets": self.resets}

    def get_state(self) -> Dict[str, Any]:
        return {"i": self.i, "resets": self.resets}


class ResumableRange:
    """An iterable over 0..n with its own ``state_dict``/``load_state_dict``:
    a loaded position applies to the next iteration only."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.start = 0
        self.position = 0

    def __iter__(self) -> Iterator[int]:
        start, self.start = self.start, 0
        self.position = start
        for i in range(start, self.n):
            self.position = i + 1
            yield i

    def state_dict(self) -> Dict[str, int]:
        return {"position": self.position}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.start = state["position"]


def save_load_round_trip(make: Callable[[], tn.BaseNode[Any]], midpoint: int) -> None:
    """Checks exact resume of the pipeline ``make()`` builds, under a Loader:
    mid-epoch, at the start, after the end with and without restart, and that
    the epoch after a restored one is the one the uninterrupted run had.

    A Loader takes its pipeline, so the end-of-epoch states load into fresh
    pipelines of the same shape, as a restarted job's would."""
    loader = tn.Loader(make())
    initial = loader.state_dict()
    it = iter(loader)
    epoch0: List[Any] = [next(it) for _ in range(midpoint)]
    mid0 = loader.state_dict()
    epoch0 += list(it)
    end0 = loader.state_dict()
    it = iter(loader)
    epoch1: List[Any] = [next(it) for _ in range(midpoint)]
    mid1 = loader.state_dict()
    epoch1 += list(it)
    assert epoch0, "the pipeline under test must yield something"

    loader.load_state_dict(mid0)
    assert list(loader) == epoch0[midpoint:]
    assert list(loader) == epoch1
    loader.load_state_dict(mid1)
    assert list(loader) == epoch1[midpoint:]
    loader.load_state_dict(initial)
    assert list(loader) == epoch0
    assert list(loader) == epoch1

    no_restart = tn.Loader(make(), restart_on_stop_iteration=False)
    no_restart.load_state_dict(end0)
    assert list(no_restart) == []
    restart = tn.Loader(make())
    restart.load_state_dict(end0)
    assert list(restart) == epoch1

    # States are plain data: through JSON and pickle they load the same.
    again = tn.Loader(make())
    again.load_state_dict(pickle.loads(pickle.dumps(json.loads(json.dumps(mid0)))))
    assert list(again) == epoch0[midpoint:]


def ids_over_two_then_three_ranks(
    loader: Callable[[int, int], Any], batches: Callable[[int], int]
) -> "Tuple[collections.Counter[int], List[Dict[str, Any]]]":
    """Runs ``loader(rank, 2)`` for ``batches(rank)`` batches of records on
    each of two ranks, reshards their states onto three and runs those to
    the end of the epoch: how often each record's ``id`` came, and the two
    ranks' states."""
    seen: List[int] = []
    states = []
    for rank in range(2):
        old = loader(rank, 2)
        it = iter(old)
        for _ in range(batches(rank)):
            seen += [r["id"] for r in next(it)]
        states.append(old.state_dict())
    for rank in range(3):
        new = loader(rank, 3)
        new.load_resharded(states, rank, 3)
        seen += [r["id"] for batch in new for r in batch]
    return collections.Counter(seen), states
