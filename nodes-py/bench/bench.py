"""The Python bench: JSON lines, each case against a baseline in the same run.

- ``python_packed``: the realistic corpus packed for training, every stage
  native (``Files`` → ``read_jsonl(field="text")`` → ``tokenize`` → ``shuffle(256)`` →
  weighted mix 0.8/0.2 → ``pack(512)`` → ``batch(8)``), iterated from Python
  as ``for batch in loader`` (numpy batches), against the same pipeline in
  the Rust bench (``realistic_packed``) over the same files, in this run.
  Target 0.9. Both must produce the same batches (a checksum of every token).
- ``python_packed_py_tokenize``: the same with tokenize a Python callable,
  against a plain Python loop doing the same work (json, the same
  tokenizer, a shuffle buffer, a weighted choice, packing, numpy batches);
  and the same pipeline written as a torchdata.nodes program (its shuffle
  buffer and packer are ``BaseNode`` subclasses, as a torchdata user writes
  them), run on ``nodes_rs.torchdata`` and, when it is installed, on
  torchdata.nodes.

Usage: python bench.py BENCH_BINARY [--quick]
(BENCH_BINARY: ``target/release/examples/bench``; build the package with
``maturin develop --release`` first.)
"""

import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import numpy as np

import nodes_rs as nr

VOCAB = 32_000
SEQ_LEN, BATCH, SHUFFLE = 512, 8, 256
RUNS = 3


def write_corpus(root: Path, divisor: int) -> Tuple[Path, Path]:
    rng = random.Random(2026)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    paths = []
    for name, records, (lo, hi) in (("common", 64_000, (8, 26)), ("rare", 16_000, (12, 40))):
        path = root / f"{name}.jsonl"
        with open(path, "w") as out:
            for i in range(records // divisor):
                text = " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))
                out.write(json.dumps({"id": i, "source": name, "text": text}) + "\n")
        paths.append(path)
    return paths[0], paths[1]


def rust_side(binary: str, files: Tuple[Path, Path]) -> Dict[str, Any]:
    env = dict(os.environ, BENCH_PACKED_FILES=f"{files[0]},{files[1]}")
    out = subprocess.run([binary, "--only", "packed"], env=env, capture_output=True, text=True, check=True)
    line: Dict[str, Any] = json.loads(out.stdout.splitlines()[0])
    assert line["case"] == "realistic_packed"
    return line


def native_pipeline(files: Tuple[Path, Path], tokenize: Any = None) -> nr.Pipeline:
    def source(path: Path, seed: int) -> nr.Pipeline:
        files = nr.Files.list([str(path)])
        if tokenize:
            tokens = files.read_jsonl().map(tokenize)
        else:
            # Only the text is tokenized: read it alone, in one pass over each line.
            tokens = files.read_jsonl(field="text").tokenize(vocab_size=VOCAB)
        return tokens.shuffle(SHUFFLE, seed)

    mix = nr.weighted({"common": source(files[0], 11), "rare": source(files[1], 12)}, {"common": 0.8, "rare": 0.2}, seed=13)
    return mix.pack(SEQ_LEN).batch(BATCH)


def checksum(batches: Iterator[Any]) -> Tuple[int, int, int]:
    count, tokens, total = 0, 0, 0
    for batch in batches:
        count += 1
        for row in batch:
            for t in row.tolist() if hasattr(row, "tolist") else row:
                total = (total * 31 + int(t)) % 2**64
                tokens += 1
    return count, tokens, total


def timed(make: Callable[[], Any], records: int) -> Tuple[float, int]:
    best, batches = float("inf"), 0
    for _ in range(RUNS):
        start = time.perf_counter()
        batches = sum(1 for _ in make())
        best = min(best, time.perf_counter() - start)
    return records / best, batches


def py_tokenize(record: Dict[str, Any]) -> List[int]:
    return [zlib.crc32(w.encode()) % VOCAB for w in record["text"].split()]


def plain_python(files: Tuple[Path, Path]) -> Iterator[Any]:
    """The same work, written as a plain Python loop."""

    def shuffled(path: Path, seed: int) -> Iterator[List[int]]:
        rng, buffer = random.Random(seed), []
        with open(path) as lines:
            for line in lines:
                buffer.append(py_tokenize(json.loads(line)))
                if len(buffer) == SHUFFLE:
                    yield buffer.pop(rng.randrange(len(buffer)))
        while buffer:
            yield buffer.pop(rng.randrange(len(buffer)))

    sources = [shuffled(files[0], 11), shuffled(files[1], 12)]
    weights, rng, pending, rows = [0.8, 0.2], random.Random(13), [], []
    while sources:
        i = rng.choices(range(len(sources)), weights)[0]
        try:
            pending.extend(next(sources[i]))
        except StopIteration:
            del sources[i], weights[i]
            continue
        while len(pending) >= SEQ_LEN:
            rows.append(pending[:SEQ_LEN])
            del pending[:SEQ_LEN]
            if len(rows) == BATCH:
                yield np.array(rows, dtype=np.uint32)
                rows = []
    if pending:
        rows.append(pending)
    if rows:
        yield rows


def torchdata_program(td: Any, files: Tuple[Path, Path]) -> Any:
    """The pipeline as a torchdata.nodes user writes it, for the module
    ``td`` (``torchdata.nodes`` or ``nodes_rs.torchdata``: same names)."""

    class Lines:
        def __init__(self, path: Path) -> None:
            self.path = path

        def __iter__(self) -> Iterator[str]:
            with open(self.path) as lines:
                yield from lines

    class Shuffle(td.BaseNode):  # type: ignore[misc]
        def __init__(self, source: Any, seed: int) -> None:
            super().__init__()
            self.source, self.seed = source, seed

        def reset(self, initial_state: Any = None) -> None:
            super().reset(initial_state)
            self.source.reset(None if initial_state is None else initial_state["source"])
            self.rng = random.Random(self.seed)
            self.buffer: List[Any] = [] if initial_state is None else initial_state["buffer"]
            if initial_state is not None:
                version, internal, gauss = initial_state["rng"]
                self.rng.setstate((version, tuple(internal), gauss))

        def next(self) -> Any:
            while len(self.buffer) < SHUFFLE:
                try:
                    self.buffer.append(next(self.source))
                except StopIteration:
                    break
            if not self.buffer:
                raise StopIteration
            return self.buffer.pop(self.rng.randrange(len(self.buffer)))

        def get_state(self) -> Dict[str, Any]:
            return {"source": self.source.state_dict(), "buffer": list(self.buffer), "rng": self.rng.getstate()}

    class Pack(td.BaseNode):  # type: ignore[misc]
        def __init__(self, source: Any) -> None:
            super().__init__()
            self.source = source

        def reset(self, initial_state: Any = None) -> None:
            super().reset(initial_state)
            self.source.reset(None if initial_state is None else initial_state["source"])
            self.pending: List[int] = [] if initial_state is None else initial_state["pending"]

        def next(self) -> List[int]:
            while len(self.pending) < SEQ_LEN:
                try:
                    self.pending.extend(next(self.source))
                except StopIteration:
                    if not self.pending:
                        raise
                    break
            row, self.pending = self.pending[:SEQ_LEN], self.pending[SEQ_LEN:]
            return row

        def get_state(self) -> Dict[str, Any]:
            return {"source": self.source.state_dict(), "pending": list(self.pending)}

    def source(path: Path, seed: int) -> Any:
        lines = td.IterableWrapper(Lines(path))
        return Shuffle(td.Mapper(lines, lambda line: py_tokenize(json.loads(line))), seed)

    mix = td.MultiNodeWeightedSampler(
        {"common": source(files[0], 11), "rare": source(files[1], 12)},
        {"common": 0.8, "rare": 0.2},
        stop_criteria=td.StopCriteria.ALL_DATASETS_EXHAUSTED,
        seed=13,
    )
    batches = td.Mapper(td.Batcher(Pack(mix), BATCH), lambda rows: np.array(rows, dtype=np.uint32) if len(rows[-1]) == SEQ_LEN else rows)
    return td.Loader(batches)


def emit(line: Dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def main() -> None:
    binary, quick = sys.argv[1], "--quick" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        files = write_corpus(Path(tmp), 10 if quick else 1)
        records = sum(1 for p in files for _ in open(p))
        rust = rust_side(binary, files)
        python_per_s, batches = timed(lambda: nr.Loader(native_pipeline(files)), records)
        count, tokens, total = checksum(iter(nr.Loader(native_pipeline(files))))
        same = (count, tokens, str(total)) == (rust["batches"], rust["tokens"], rust["sum"])
        ratio = round(python_per_s / rust["framework_per_s"], 3)
        emit(
            {
                "case": "python_packed",
                "items": records,
                "framework_per_s": round(python_per_s),
                "baseline_per_s": rust["framework_per_s"],
                "ratio": ratio,
                "target": 0.9,
                "met": ratio >= 0.9,
                "baseline": "realistic_packed of the Rust bench, same files, this run",
                "same_batches": same,
                "batches": batches,
            }
        )
        assert same, "the Python and Rust pipelines must give the same batches"

        with_callable, _ = timed(lambda: nr.Loader(native_pipeline(files, py_tokenize)), records)
        plain, _ = timed(lambda: plain_python(files), records)
        line: Dict[str, Any] = {
            "case": "python_packed_py_tokenize",
            "items": records,
            "framework_per_s": round(with_callable),
            "baseline_per_s": round(plain),
            "ratio": round(with_callable / plain, 3),
            "target": None,
            "baseline": "a plain Python loop: json, the same tokenizer, shuffle buffer, weighted choice, packing, numpy",
        }
        import nodes_rs.torchdata as mirror

        program, _ = timed(lambda: torchdata_program(mirror, files), records)
        line["torchdata_program_on_nodes_rs_per_s"] = round(program)
        if importlib.util.find_spec("torchdata") is None:
            line["torchdata"] = "not installed: no comparison"
        else:
            torchdata_nodes = importlib.import_module("torchdata.nodes")
            upstream, _ = timed(lambda: torchdata_program(torchdata_nodes, files), records)
            line["torchdata_per_s"] = round(upstream)
            line["ratio_vs_torchdata"] = round(with_callable / upstream, 3)
        emit(line)


if __name__ == "__main__":
    main()
