"""nodes_rs: checkpointable data-loading pipelines in Rust, from Python.

- ``nodes_rs.Files(...).read_jsonl().tokenize().shuffle(...).pack(...).batch(...)``
  chains Rust-native stages; token batches come out as numpy arrays.
- ``nodes_rs.torchdata`` has torchdata.nodes' classes under the same names:
  change ``import torchdata.nodes`` to ``import nodes_rs.torchdata``.
- ``nodes_rs.Loader`` runs either, epoch after epoch, with exact resume from
  any ``state_dict()``, also on another number of ranks (``reshard``).
"""

from nodes_rs._native import NodesError, __version__
from nodes_rs.pipeline import Files, Pipeline, new_batch_size, reshard, round_robin, source, weighted
from nodes_rs.torchdata.loader import Loader

__all__ = [
    "Files",
    "Loader",
    "NodesError",
    "Pipeline",
    "__version__",
    "new_batch_size",
    "reshard",
    "round_robin",
    "source",
    "weighted",
]
