"""``MultiNodeWeightedSampler``: items drawn from several sources by weight."""

from typing import Any, Dict, Mapping, Optional, TypeVar

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source
from nodes_rs.torchdata.samplers.stop_criteria import StopCriteria

T = TypeVar("T")


class MultiNodeWeightedSampler(NativeNode[T]):
    """Items of the named sources, each drawn from source ``k`` with
    probability ``weights[k] / sum(weights)`` by a generator seeded from
    ``seed``, the rank, the world size and the epoch.

    ``rank``/``world_size`` default to the ``RANK``/``WORLD_SIZE``
    environment variables. Weights are positive numbers (torchdata refuses
    integers; here ``1`` is ``1.0``). The seeded order is not torchdata's.
    """

    def __init__(
        self,
        source_nodes: Mapping[str, BaseNode[T]],
        weights: Dict[str, float],
        stop_criteria: str = StopCriteria.CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        seed: int = 0,
        tag_output: bool = False,
    ) -> None:
        super().__init__()
        if set(source_nodes) != set(weights):
            raise ValueError(
                "keys of source_nodes and weights must be the same: "
                f"{sorted(source_nodes)} and {sorted(weights)}"
            )
        for name, weight in weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
                raise ValueError(f"weights must be positive numbers: {name!r} has {weight!r}")
        if (rank is None) != (world_size is None):
            raise ValueError("pass both rank and world_size, or neither (then the environment's)")
        self.source_nodes = source_nodes
        self.weights = weights
        self.stop_criteria = stop_criteria
        self.seed = seed
        self.tag_output = tag_output
        sources: Dict[str, Any] = {k: native_source(v) for k, v in source_nodes.items()}
        self._native = _native.weighted(
            sources,
            {k: float(w) for k, w in weights.items()},
            stop_criteria,
            rank,
            world_size,
            seed,
            tag_output,
        )

    @property
    def epoch(self) -> int:
        """The mix's epoch: passes that started before this one."""
        return int(self.get_state()["epoch"])

    @property
    def num_yielded(self) -> int:
        """Items returned this pass."""
        return int(self.get_state()["num_yielded"])

    @property
    def rank(self) -> int:
        """This rank, whose stream of draws the mix follows."""
        return int(self.get_state()["rng"]["rank"])

    @property
    def world_size(self) -> int:
        """The number of ranks."""
        return int(self.get_state()["rng"]["world_size"])


__all__ = ["MultiNodeWeightedSampler"]
