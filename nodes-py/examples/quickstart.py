"""A torchdata.nodes program on nodes_rs: map on two threads, batch, prefetch;
checkpoint mid-epoch and resume in a new loader, nothing lost or repeated."""

from typing import Any, Dict, List

import nodes_rs.torchdata as tn


def square(x: int) -> int:
    return x * x


def pipeline() -> tn.BaseNode[List[int]]:
    source = tn.IterableWrapper(range(100))
    squares = tn.ParallelMapper(source, square, num_workers=2)
    return tn.Prefetcher(tn.Batcher(squares, batch_size=8), prefetch_factor=2)


loader = tn.Loader(pipeline())
seen: List[List[int]] = []
state: Dict[str, Any] = {}
for i, batch in enumerate(loader):
    seen.append(batch)
    if i == 4:
        state = loader.state_dict()  # a plain dict: save it with json or pickle
        break

resumed = tn.Loader(pipeline())
resumed.load_state_dict(state)
seen += list(resumed)
assert [x for batch in seen for x in batch] == [square(x) for x in range(96)]
print(f"{len(seen)} batches, resumed after batch 5 with nothing lost or repeated")
