"""MultiNodeWeightedSampler and MultiNodeRoundRobinSampler."""

import collections
from typing import Any, Dict, List, Union

import pytest

import nodes_rs.torchdata as tn
from conftest import save_load_round_trip
from nodes_rs.torchdata.samplers.multi_node_round_robin_sampler import MultiNodeRoundRobinSampler
from nodes_rs.torchdata.samplers.stop_criteria import StopCriteria

WEIGHTS = {"ds0": 0.1, "ds1": 0.2, "ds2": 0.3, "ds3": 0.4}


def named_rows(name: str, n: int) -> tn.BaseNode[Dict[str, Any]]:
    return tn.IterableWrapper([{"name": name, "step": i} for i in range(n)])


def sources(n: int = 10) -> Dict[str, tn.BaseNode[Dict[str, Any]]]:
    return {name: named_rows(name, n) for name in WEIGHTS}


def counts(items: List[Dict[str, Any]]) -> Dict[str, int]:
    return dict(collections.Counter(r["name"] for r in items))


def test_the_package_exports_them() -> None:
    assert isinstance(tn.MultiNodeWeightedSampler, type) and isinstance(tn.StopCriteria, type)


@pytest.mark.parametrize(
    "weights, match",
    [
        ({"dummy0": 0.1, "dummy1": 0.2, "dummy2": 0.3, "dummy3": 0.4}, "keys of source_nodes and weights"),
        ({"ds0": -1.0, "ds1": 0.2, "ds2": 0.3, "ds3": 0.4}, "positive"),
        ({"ds0": 0, "ds1": 10, "ds2": 20, "ds3": 30}, "positive"),
        ({"ds0": [1.0], "ds1": 0.2, "ds2": 0.3, "ds3": 0.4}, "positive"),
    ],
)
def test_bad_weights_are_value_errors(weights: Dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tn.MultiNodeWeightedSampler(sources(), weights)


@pytest.mark.parametrize("seed", range(5))
def test_first_exhausted(seed: int) -> None:
    node = tn.Prefetcher(
        tn.MultiNodeWeightedSampler(sources(), WEIGHTS, StopCriteria.FIRST_DATASET_EXHAUSTED, seed=seed), 3
    )
    for _ in range(3):
        node.reset()
        per = counts(list(node))
        assert max(per.values()) == 10
    node.shutdown()


@pytest.mark.parametrize("seed", range(5))
def test_all_exhausted(seed: int) -> None:
    node = tn.Prefetcher(
        tn.MultiNodeWeightedSampler(sources(), WEIGHTS, StopCriteria.ALL_DATASETS_EXHAUSTED, seed=seed), 3
    )
    for _ in range(3):
        node.reset()
        assert counts(list(node)) == {name: 10 for name in WEIGHTS}


@pytest.mark.parametrize("seed", range(5))
def test_cycle_until_all_exhausted(seed: int) -> None:
    node = tn.MultiNodeWeightedSampler(sources(), WEIGHTS, seed=seed)
    for _ in range(3):
        node.reset()
        per = counts(list(node))
        assert set(per) == set(WEIGHTS) and min(per.values()) >= 10


@pytest.mark.parametrize("seed", range(3))
def test_cycle_forever(seed: int) -> None:
    node = tn.MultiNodeWeightedSampler(
        sources(), {k: 1.0 for k in WEIGHTS}, StopCriteria.CYCLE_FOREVER, seed=seed
    )
    for _ in range(256):
        next(node)
    assert node.num_yielded == 256


@pytest.mark.parametrize("rank, world_size", [(1, 8), (8, 32)])
def test_explicit_rank_and_world_size(rank: int, world_size: int) -> None:
    node = tn.MultiNodeWeightedSampler(sources(), WEIGHTS, rank=rank, world_size=world_size)
    assert (node.rank, node.world_size) == (rank, world_size)


def test_each_rank_draws_its_own_order() -> None:
    orders = []
    for rank in range(8):
        node = tn.MultiNodeWeightedSampler(sources(), WEIGHTS, rank=rank, world_size=8)
        orders.append(tuple((r["name"], r["step"]) for r in node))
    assert len(set(orders)) == 8


def test_each_epoch_draws_its_own_order() -> None:
    node = tn.MultiNodeWeightedSampler(sources(), WEIGHTS)
    epochs = []
    for _ in range(3):
        node.reset()
        epochs.append(tuple((r["name"], r["step"]) for r in node))
    assert len(set(epochs)) == 3


@pytest.mark.parametrize("midpoint", [1, 4, 7])
@pytest.mark.parametrize(
    "stop",
    [StopCriteria.ALL_DATASETS_EXHAUSTED, StopCriteria.FIRST_DATASET_EXHAUSTED, StopCriteria.CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED],
)
@pytest.mark.parametrize("prefetch", [False, True])
def test_weighted_resumes(midpoint: int, stop: str, prefetch: bool) -> None:
    def make() -> tn.BaseNode[Any]:
        node: tn.BaseNode[Any] = tn.MultiNodeWeightedSampler(sources(), WEIGHTS, stop, seed=7)
        return tn.Prefetcher(node, 3) if prefetch else node

    save_load_round_trip(make, midpoint)


@pytest.mark.parametrize("midpoint", [100, 500, 1200])
def test_weighted_resumes_over_large_sources(midpoint: int) -> None:
    names = [f"ds{i}" for i in range(5)]
    save_load_round_trip(
        lambda: tn.Prefetcher(
            tn.MultiNodeWeightedSampler(
                {n: named_rows(n, 1500) for n in names}, {n: 1.0 + i for i, n in enumerate(names)}
            ),
            3,
        ),
        midpoint,
    )


def test_weighted_tags_dicts_in_place_and_wraps_others() -> None:
    tagged = list(tn.MultiNodeWeightedSampler(sources(), WEIGHTS, tag_output=True))
    assert all(r["dataset_key"] == r["name"] for r in tagged)
    ints = {"a": tn.IterableWrapper(range(3)), "b": tn.IterableWrapper(range(3))}
    wrapped: List[Any] = list(tn.MultiNodeWeightedSampler(ints, {"a": 1.0, "b": 1.0}, tag_output=True))
    assert all(set(r) == {"dataset_key", "data"} for r in wrapped)
    plain = list(tn.MultiNodeWeightedSampler(sources(), WEIGHTS))
    assert all(set(r) == {"name", "step"} for r in plain)


def unequal(d: int, n: int, as_list: bool) -> Union[Dict[str, Any], List[Any]]:
    nodes = [named_rows(f"ds{i}", n + i) for i in range(d)]
    return nodes if as_list else {f"ds{i}": node for i, node in enumerate(nodes)}


@pytest.mark.parametrize("as_list", [False, True])
def test_round_robin_over_empty_sources(as_list: bool) -> None:
    srcs: Any = [named_rows("e", 0) for _ in range(3)]
    if not as_list:
        srcs = {f"ds{i}": s for i, s in enumerate(srcs)}
    node = MultiNodeRoundRobinSampler(srcs, StopCriteria.FIRST_DATASET_EXHAUSTED)
    assert list(node) == []


@pytest.mark.parametrize("n", [1, 4, 8])
@pytest.mark.parametrize("d", [1, 2, 4])
def test_round_robin_stop_criteria(n: int, d: int) -> None:
    all_items = list(MultiNodeRoundRobinSampler(unequal(d, n, False), StopCriteria.ALL_DATASETS_EXHAUSTED))
    assert len(all_items) == sum(n + i for i in range(d))
    first = list(MultiNodeRoundRobinSampler(unequal(d, n, True), StopCriteria.FIRST_DATASET_EXHAUSTED))
    assert len(first) == d * n


def test_round_robin_cycle_until_all() -> None:
    items = list(MultiNodeRoundRobinSampler(unequal(3, 1, False)))
    assert len(items) == 11
    assert counts(items) == {"ds0": 4, "ds1": 4, "ds2": 3}
    batches = list(tn.Batcher(MultiNodeRoundRobinSampler(unequal(3, 1, False)), 3))
    assert [[r["name"] for r in b] for b in batches] == [["ds0", "ds1", "ds2"]] * 3
    assert [[r["step"] for r in b] for b in batches] == [[0, 0, 0], [0, 1, 1], [0, 0, 2]]


def test_round_robin_tags() -> None:
    node = MultiNodeRoundRobinSampler(unequal(3, 5, True), StopCriteria.FIRST_DATASET_EXHAUSTED, tag_output=True)
    keys = [r["dataset_key"] for r in node]
    assert keys[:6] == ["ds_0", "ds_1", "ds_2"] * 2
    with pytest.raises(TypeError, match="tag_output must be a boolean"):
        MultiNodeRoundRobinSampler(unequal(3, 5, True), tag_output=123)  # type: ignore[arg-type]


def test_round_robin_refuses_cycle_forever() -> None:
    with pytest.raises(ValueError, match="CYCLE_FOREVER"):
        MultiNodeRoundRobinSampler(unequal(2, 2, False), StopCriteria.CYCLE_FOREVER)


@pytest.mark.parametrize("midpoint", [100, 500, 1200])
@pytest.mark.parametrize(
    "stop",
    [StopCriteria.ALL_DATASETS_EXHAUSTED, StopCriteria.FIRST_DATASET_EXHAUSTED, StopCriteria.CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED],
)
@pytest.mark.parametrize("tag_output", [False, True])
def test_round_robin_resumes(midpoint: int, stop: str, tag_output: bool) -> None:
    save_load_round_trip(
        lambda: tn.Prefetcher(
            MultiNodeRoundRobinSampler(
                {f"ds{i}": named_rows(f"ds{i}", 1500 + i) for i in range(3)}, stop, tag_output
            ),
            3,
        ),
        midpoint,
    )


def test_round_robin_epochs_are_the_same() -> None:
    loader = tn.Loader(tn.Batcher(MultiNodeRoundRobinSampler(unequal(3, 1, False)), 3))
    assert list(loader) == list(loader)


def test_a_round_robin_state_of_other_sources_is_refused() -> None:
    three = MultiNodeRoundRobinSampler(unequal(3, 2, False))
    next(three)
    state = three.state_dict()
    four = MultiNodeRoundRobinSampler(unequal(4, 2, False))
    with pytest.raises(ValueError):
        four.reset(state)
    reversed_keys = MultiNodeRoundRobinSampler(dict(reversed(list(unequal(3, 2, False).items()))))  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        reversed_keys.reset(state)


def test_round_robin_state_names_its_position() -> None:
    node = MultiNodeRoundRobinSampler(unequal(3, 2, False))
    assert {"current_dataset_index", "datasets_exhausted", "dataset_node_states"} <= set(node.state_dict())


def test_round_robin_state_moves_with_a_batch() -> None:
    node = tn.Batcher(MultiNodeRoundRobinSampler(unequal(3, 1, False)), 3)
    node.reset()
    at_start = node.state_dict()
    next(node)
    assert node.state_dict() != at_start
    node.reset()
    assert node.state_dict() == at_start


def test_round_robin_of_batchers_of_unequal_sizes() -> None:
    batched = {f"ds{i}": tn.Batcher(named_rows(f"ds{i}", i + 1), i + 1) for i in range(3)}
    loader = tn.Loader(MultiNodeRoundRobinSampler(batched, StopCriteria.ALL_DATASETS_EXHAUSTED))
    batches = list(loader)
    assert [len(b) for b in batches] == [1, 2, 3]
    assert [{r["name"] for r in b} for b in batches] == [{"ds0"}, {"ds1"}, {"ds2"}]


def test_round_robin_equal_sources_batched() -> None:
    node = tn.Batcher(
        MultiNodeRoundRobinSampler({f"ds{i}": named_rows(f"ds{i}", 1) for i in range(3)}, StopCriteria.FIRST_DATASET_EXHAUSTED),
        3,
    )
    assert [[r["name"] for r in b] for b in node] == [["ds0", "ds1", "ds2"]]
