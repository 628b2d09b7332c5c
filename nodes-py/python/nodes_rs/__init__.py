"""nodes_rs: checkpointable data-loading pipelines in Rust, from Python.

``nodes_rs.torchdata`` has torchdata.nodes' classes under the same names:
change ``import torchdata.nodes`` to ``import nodes_rs.torchdata`` and a
program runs on the Rust pipelines, with exact resume from any state.
"""

from nodes_rs._native import NodesError, __version__

__all__ = ["NodesError", "__version__"]
