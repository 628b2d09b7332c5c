"""ParallelMapper(method="process"): the callable runs in worker processes,
with the order, errors and states of threads."""

import os
from typing import Any, Optional

import pytest

import nodes_rs.torchdata as tn
from conftest import CountingRange, save_load_round_trip
from process_fns import double, fail_on_three, tagged_with_pid
from test_transforms import rows

CONTEXTS = ["spawn", "forkserver"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("in_order", [True, False])
@pytest.mark.parametrize("prebatch", [None, 3])
def test_processes_map_every_item(context: str, in_order: bool, prebatch: Optional[int]) -> None:
    node = tn.ParallelMapper(
        tn.IterableWrapper(range(60)),
        double,
        3,
        in_order,
        method="process",
        multiprocessing_context=context,
        prebatch=prebatch,
    )
    out = list(node)
    assert (out if in_order else sorted(out)) == [2 * x for x in range(60)]
    node.shutdown()


@pytest.mark.timeout(300)
def test_the_work_happens_in_other_processes() -> None:
    node = tn.ParallelMapper(rows(20), tagged_with_pid, 2, method="process", multiprocessing_context="spawn")
    pids = {r["pid"] for r in node}
    assert os.getpid() not in pids and pids
    assert [r["step"] for r in tn.ParallelMapper(rows(5), tagged_with_pid, 2, method="process")] == list(range(5))


@pytest.mark.timeout(300)
def test_an_exception_in_a_worker_process_reaches_the_caller_as_itself() -> None:
    node = tn.ParallelMapper(tn.IterableWrapper(range(10)), fail_on_three, 2, method="process", multiprocessing_context="spawn")
    seen = []
    with pytest.raises(KeyError, match="no item 3"):
        for x in node:
            seen.append(x)
    assert seen == [0, 1, 2]
    assert list(node) == []


@pytest.mark.timeout(600)
@pytest.mark.parametrize("midpoint", [0, 7, 13])
@pytest.mark.parametrize("snapshot_frequency", [0, 1, 9])
@pytest.mark.parametrize("prebatch", [None, 3])
def test_processes_resume(midpoint: int, snapshot_frequency: int, prebatch: Optional[int]) -> None:
    def make() -> tn.BaseNode[Any]:
        batches = tn.Batcher(CountingRange(80), 6, drop_last=False)
        mapped = tn.ParallelMapper(
            batches,
            len,
            2,
            method="process",
            multiprocessing_context="forkserver",
            snapshot_frequency=snapshot_frequency,
            prebatch=prebatch,
        )
        return tn.Prefetcher(mapped, 2)

    save_load_round_trip(make, midpoint)


def test_shutdown_stops_the_processes_and_reaches_the_source() -> None:
    from test_map import Closable

    source = Closable()
    node = tn.ParallelMapper(source, double, 2, method="process", multiprocessing_context="spawn")
    node.reset()
    assert next(node) == 2
    pool = node._processes.pool() if node._processes else None
    assert pool is not None
    node.shutdown()
    assert source.shutdowns == 1
    with pytest.raises(ValueError):
        pool.apply(double, (1,))  # a terminated pool takes no work
