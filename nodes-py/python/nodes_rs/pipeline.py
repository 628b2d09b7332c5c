"""The Rust-native stages, chained from Python: files and their readers,
tokenizing, shuffling, packing, batching, mixing. Items stay in Rust from
stage to stage; a batch of equal-length token sequences reaches Python as
one 2-D ``uint32`` numpy array."""

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from nodes_rs import _native
from nodes_rs.torchdata.base_node import BaseNode, NativeNode, native_source
from nodes_rs.torchdata.map import ParallelMapper

Shard = Union[Tuple[int, int], str]


class Pipeline(NativeNode[Any]):
    """A native pipeline. Each method returns a new pipeline that takes this
    one as its source (so chain the calls, and iterate the last).

    It is a ``BaseNode``: a torchdata-style node can be its source or its
    parent, and ``Loader`` runs it epoch after epoch with checkpoints.
    """

    def __init__(self, native: Any) -> None:
        super().__init__()
        self._native = native

    def map(self, fn: Callable[[Any], Any]) -> "Pipeline":
        """``fn`` over every item, on the caller's thread."""
        return Pipeline(_native.map(self._native, fn))

    def par_map(
        self, fn: Callable[[Any], Any], num_workers: int, in_order: bool = True
    ) -> "Pipeline":
        """``fn`` over every item on ``num_workers`` threads (a Python ``fn``
        holds the GIL while it runs)."""
        return Pipeline(ParallelMapper(self, fn, num_workers, in_order)._native)

    def filter(self, fn: Callable[[Any], bool]) -> "Pipeline":
        """The items for which ``fn`` returns a true value."""
        return Pipeline(_native.filter(self._native, fn))

    def filter_map(self, fn: Callable[[Any], Any]) -> "Pipeline":
        """What ``fn`` returns for each item; ``None`` drops the item."""
        return Pipeline(_native.filter_map(self._native, fn))

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> "Pipeline":
        """The elements of the iterable ``fn`` returns for each item."""
        return Pipeline(_native.flat_map(self._native, fn))

    def tokenize(
        self, field: str = "text", tokenizer: str = "words", vocab_size: int = 50_257
    ) -> "Pipeline":
        """Token ids of each record's ``field`` (or of each line):
        ``"words"`` hashes whitespace-separated words into ``vocab_size`` ids,
        ``"bytes"`` gives the UTF-8 bytes. Runs in Rust."""
        return Pipeline(_native.tokenize(self._native, field, tokenizer, vocab_size))

    def shuffle(self, buffer_size: int, seed: int) -> "Pipeline":
        """A seeded shuffle through a buffer of ``buffer_size`` items, new each
        epoch; the buffer is saved in states (its Python items as JSON)."""
        return Pipeline(_native.shuffle(self._native, buffer_size, seed))

    def pack(self, seq_len: int, exact: bool = False) -> "Pipeline":
        """Token sequences packed end to end into rows of ``seq_len``; the
        short last row is kept, or dropped when ``exact``."""
        return Pipeline(_native.pack(self._native, seq_len, exact))

    def batch(self, batch_size: int, drop_last: bool = False) -> "Pipeline":
        """Batches of ``batch_size``: one 2-D numpy array for token rows of
        one length, else a list."""
        return Pipeline(_native.batch(self._native, batch_size, drop_last))

    def unbatch(self) -> "Pipeline":
        """The elements of each batch, in order."""
        return Pipeline(_native.unbatch(self._native))

    def shard(self, rank: int, world_size: int) -> "Pipeline":
        """Every ``world_size``-th item, from ``rank``."""
        return Pipeline(_native.shard(self._native, rank, world_size))

    def header(self, n: int) -> "Pipeline":
        """The first ``n`` items."""
        return Pipeline(_native.header(self._native, n))

    def cycle(self, max_cycles: Optional[int] = None) -> "Pipeline":
        """Pass after pass of this pipeline (at most ``max_cycles``)."""
        return Pipeline(_native.cycle(self._native, max_cycles))

    def prefetch(self, prefetch_factor: int) -> "Pipeline":
        """Up to ``prefetch_factor`` items read ahead on a thread of its own."""
        return Pipeline(_native.prefetch(self._native, prefetch_factor))


def source(node: BaseNode[Any]) -> Pipeline:
    """A native pipeline over any node (a torchdata-style node, or a Python
    ``BaseNode`` subclass), to chain native stages onto it."""
    if isinstance(node, Pipeline):
        return node
    if isinstance(node, NativeNode):
        return Pipeline(node._native)
    return Pipeline(_native.python_node(node))


def _names(columns: Optional[Iterable[str]]) -> Optional[List[str]]:
    """Column names as a list; one string is refused (it would be read as
    its letters)."""
    if isinstance(columns, str):
        raise TypeError(f"columns is a list of names, not the string {columns!r}: try [{columns!r}]")
    return None if columns is None else list(columns)


class Files:
    """A list of files: a directory (``in_dir``), a glob, or explicit paths;
    local paths, or ``s3://``, ``gs://``, ``az://`` and ``http(s)://`` URLs
    (credentials from the environment). Sorted, or shuffled anew each epoch
    with ``shuffle_files``; split among ranks by file with ``shard``."""

    def __init__(self, kind: str, paths: List[str]) -> None:
        self._kind = kind
        self._paths = paths
        self._seed: Optional[int] = None
        self._shard: Optional[Shard] = None

    @staticmethod
    def in_dir(path: str) -> "Files":
        """The files under a directory (or an object-store prefix)."""
        return Files("in_dir", [str(path)])

    @staticmethod
    def glob(pattern: str) -> "Files":
        """The files a glob matches."""
        return Files("glob", [pattern])

    @staticmethod
    def list(paths: Iterable[str]) -> "Files":
        """These files, in this order."""
        return Files("list", [str(p) for p in paths])

    def shuffle_files(self, seed: int) -> "Files":
        """The files in a seeded order, new each epoch."""
        self._seed = seed
        return self

    def shard(self, rank: int, world_size: int) -> "Files":
        """Every ``world_size``-th file, from ``rank``."""
        self._shard = (rank, world_size)
        return self

    def shard_from_env(self) -> "Files":
        """``shard`` with ``RANK`` and ``WORLD_SIZE`` from the environment."""
        self._shard = "env"
        return self

    def _read(self, reader: str, on_error: str, max_errors: Optional[int], **kw: Any) -> Pipeline:
        native = _native.read_files(
            self._kind, self._paths, reader, self._seed, self._shard, on_error, max_errors, **kw
        )
        return Pipeline(native)

    def read_lines(self, on_error: str = "deliver", max_errors: Optional[int] = None) -> Pipeline:
        """The lines of each file (``.gz`` and ``.zst`` decompressed). A bad
        line is an error item: ``on_error`` delivers it (``"deliver"``), ends
        the pass (``"fail"``) or skips it (``"skip"``, at most ``max_errors``)."""
        return self._read("lines", on_error, max_errors)

    def read_jsonl(
        self, on_error: str = "deliver", max_errors: Optional[int] = None, field: Optional[str] = None
    ) -> Pipeline:
        """The JSON records of each file (dicts in Python), one per line; with
        ``field``, the string at that field of each record, parsed in one pass
        (a record without it is a bad record)."""
        return self._read("jsonl", on_error, max_errors, field=field)

    def read_parquet(
        self, on_error: str = "deliver", max_errors: Optional[int] = None, columns: Optional[Iterable[str]] = None
    ) -> Pipeline:
        """The rows of each Parquet file, as dicts; with ``columns``, of only
        those top-level columns (the others are not read; a file without one
        of them is a bad record naming the column and the file)."""
        return self._read("parquet", on_error, max_errors, columns=_names(columns))

    def interleave(
        self,
        reader: str = "jsonl",
        cycle_length: int = 2,
        block_length: int = 1,
        on_error: str = "deliver",
        max_errors: Optional[int] = None,
        field: Optional[str] = None,
        columns: Optional[Iterable[str]] = None,
    ) -> Pipeline:
        """``cycle_length`` files read at a time, ``block_length`` records from
        each in turn, by ``reader`` (``"lines"``, ``"jsonl"``, ``"parquet"``;
        ``field`` as for ``read_jsonl``, ``columns`` as for ``read_parquet``)."""
        return self._read(
            reader,
            on_error,
            max_errors,
            cycle_length=cycle_length,
            block_length=block_length,
            field=field,
            columns=_names(columns),
        )


def weighted(
    sources: Mapping[str, BaseNode[Any]],
    weights: Mapping[str, float],
    seed: int = 0,
    stop_criteria: str = "ALL_DATASETS_EXHAUSTED",
    rank: Optional[int] = None,
    world_size: Optional[int] = None,
) -> Pipeline:
    """Items of the named sources drawn by weight (a seeded stream per rank
    and epoch). The rank is ``rank`` of ``world_size`` when both are given,
    else read from ``RANK``/``WORLD_SIZE``; a pipeline that is resharded
    passes them, as the files' ``shard`` does."""
    if (rank is None) != (world_size is None):
        raise ValueError("weighted: give both rank and world_size, or neither")
    natives: Dict[str, Any] = {k: native_source(v) for k, v in sources.items()}
    floats = {k: float(w) for k, w in weights.items()}
    return Pipeline(_native.weighted(natives, floats, stop_criteria, rank, world_size, seed))


def round_robin(
    sources: Mapping[str, BaseNode[Any]], stop_criteria: str = "ALL_DATASETS_EXHAUSTED"
) -> Pipeline:
    """One item of each named source in turn."""
    natives: Dict[str, Any] = {k: native_source(v) for k, v in sources.items()}
    return Pipeline(_native.round_robin(natives, stop_criteria))


def reshard(
    states: List[Dict[str, Any]], new_world_size: int, batch_sizes: str = "per_rank"
) -> List[Dict[str, Any]]:
    """The loader states of a job's ``len(states)`` ranks (in rank order),
    dealt to ``new_world_size`` ranks: every record of the rest of the epoch
    goes to exactly one new rank.

    ``batch_sizes``: ``"per_rank"`` (each new rank batches as old rank 0
    did), ``"keep_global"`` (the job's global batch, the sum of the old
    ranks' batch sizes, is divided among the new ranks; a ``ValueError``
    names the nearest rank counts that divide it when ``new_world_size``
    does not) or ``"keep_global_uneven"`` (divided as evenly as it goes).
    ``new_batch_size`` tells each new rank its size."""
    out: List[Dict[str, Any]] = _native.reshard(states, new_world_size, batch_sizes)
    return out


def new_batch_size(
    states: List[Dict[str, Any]], rank: int, new_world_size: int, batch_sizes: str = "per_rank"
) -> Optional[int]:
    """The size of the outermost ``batch`` that new rank ``rank`` builds its
    pipeline with, after a reshard of ``states`` with ``batch_sizes``
    (``None`` for a pipeline without one)."""
    size: Optional[int] = _native.new_batch_size(states, rank, new_world_size, batch_sizes)
    return size


__all__ = ["Files", "Pipeline", "new_batch_size", "reshard", "round_robin", "source", "weighted"]
