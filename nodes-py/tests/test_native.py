"""The Rust-native stages from Python: files, readers, tokenize, shuffle,
pack, batch, mixes; exact resume and elastic resharding through them."""

import collections
import gzip
import json
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import pytest

import nodes_rs as nr
import nodes_rs.torchdata as tn
from conftest import ids_over_two_then_three_ranks, save_load_round_trip


def fnv1a(word: str) -> int:
    h = 0xCBF29CE484222325
    for byte in word.encode():
        h = ((h ^ byte) * 0x100000001B3) % 2**64
    return h


def write_corpus(root: Path, files: int, records: int) -> Dict[int, str]:
    """JSONL files of records ``{"id", "text"}``; returns text by id."""
    texts = {}
    for f in range(files):
        with open(root / f"part{f:02}.jsonl", "w") as out:
            for i in range(records):
                rid = f * 1000 + i
                texts[rid] = " ".join(f"w{(rid * 7 + j) % 13}" for j in range(i % 5 + 1))
                out.write(json.dumps({"id": rid, "text": texts[rid]}) + "\n")
    return texts


@pytest.fixture
def corpus(tmp_path: Path) -> Dict[int, str]:
    return write_corpus(tmp_path, files=5, records=40)


def test_records_are_dicts_in_file_order(tmp_path: Path, corpus: Dict[int, str]) -> None:
    records = list(nr.Files.in_dir(str(tmp_path)).read_jsonl())
    assert [r["id"] for r in records] == sorted(corpus)
    assert all(r["text"] == corpus[r["id"]] for r in records)


def test_lines_are_strings(tmp_path: Path, corpus: Dict[int, str]) -> None:
    lines = list(nr.Files.glob(str(tmp_path / "part00.jsonl")).read_lines())
    assert [json.loads(line)["id"] for line in lines] == list(range(40))


def test_tokenize_words_and_bytes(tmp_path: Path, corpus: Dict[int, str]) -> None:
    files = nr.Files.list([str(tmp_path / "part01.jsonl")])
    words = list(files.read_jsonl().tokenize(vocab_size=97))
    texts = [corpus[1000 + i] for i in range(40)]
    assert [t.tolist() for t in words] == [[fnv1a(w) % 97 for w in t.split()] for t in texts]
    files = nr.Files.list([str(tmp_path / "part01.jsonl")])
    raw = list(files.read_jsonl().tokenize(tokenizer="bytes"))
    assert [t.tolist() for t in raw] == [list(t.encode()) for t in texts]
    assert all(t.dtype == np.uint32 for t in raw)


def test_a_field_of_each_record_is_read_in_one_pass(tmp_path: Path, corpus: Dict[int, str]) -> None:
    texts = list(nr.Files.in_dir(str(tmp_path)).read_jsonl(field="text"))
    assert texts == [corpus[i] for i in sorted(corpus)]
    whole = nr.Files.in_dir(str(tmp_path)).read_jsonl().tokenize(vocab_size=31)
    fields = nr.Files.in_dir(str(tmp_path)).read_jsonl(field="text").tokenize(vocab_size=31)
    assert [t.tolist() for t in fields] == [t.tolist() for t in whole]
    interleaved = nr.Files.in_dir(str(tmp_path)).interleave("jsonl", cycle_length=3, field="text")
    assert sorted(interleaved) == sorted(corpus.values())
    save_load_round_trip(lambda: nr.Files.in_dir(str(tmp_path)).read_jsonl(field="text").shuffle(6, seed=1), 17)
    with pytest.raises(ValueError, match="field goes with the \"jsonl\" reader"):
        nr.Files.in_dir(str(tmp_path)).interleave("lines", field="text")


def test_a_record_without_the_field_is_a_bad_record(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n{"id": 2}\n{"text": 7}\n[1]\n{"text": "y\\u00e9"}\n')
    kept = list(nr.Files.in_dir(str(tmp_path)).read_jsonl(on_error="skip", field="text"))
    assert kept == ["x", "y\u00e9"]
    with pytest.raises(nr.NodesError, match='a.jsonl:2: .*no string field "text"'):
        list(nr.Files.in_dir(str(tmp_path)).read_jsonl(field="text"))


def zstd_frames(data: bytes, frame_bytes: int) -> bytes:
    """``data`` as zstd frames of raw (stored) blocks, ``frame_bytes`` of it
    per frame: valid zstd that needs no compressor module."""
    out = b""
    for start in range(0, len(data), frame_bytes):
        chunk = data[start : start + frame_bytes]
        # Magic; no flags; a 1 MiB window; one last raw block of len(chunk).
        out += (0xFD2FB528).to_bytes(4, "little") + bytes([0, 0x50])
        out += ((len(chunk) << 3) | 1).to_bytes(3, "little") + chunk
    return out


def test_gzip_and_zstd_files_read_and_resume(tmp_path: Path) -> None:
    texts = write_corpus(tmp_path, files=3, records=30)
    for f, ext in [(0, ".gz"), (1, ".zst")]:
        plain = tmp_path / f"part{f:02}.jsonl"
        data = plain.read_bytes()
        packed = gzip.compress(data) if ext == ".gz" else zstd_frames(data, 300)
        (tmp_path / f"part{f:02}.jsonl{ext}").write_bytes(packed)
        plain.unlink()
    records = list(nr.Files.in_dir(str(tmp_path)).read_jsonl())
    assert [r["id"] for r in records] == sorted(texts)
    save_load_round_trip(lambda: nr.Files.in_dir(str(tmp_path)).read_jsonl(field="text"), 44)


def test_packed_batches_are_one_array_each(tmp_path: Path, corpus: Dict[int, str]) -> None:
    texts = [corpus[i] for i in sorted(corpus)]
    stream = [b for t in texts for b in t.encode()]
    batches = list(
        nr.Files.in_dir(str(tmp_path)).read_jsonl().tokenize(tokenizer="bytes").pack(16, exact=True).batch(4, drop_last=True)
    )
    assert all(isinstance(b, np.ndarray) and b.shape == (4, 16) and b.dtype == np.uint32 for b in batches)
    rows = len(stream) // 16 // 4 * 4
    assert np.concatenate(batches).reshape(-1).tolist() == stream[: rows * 16]


def test_a_shuffle_is_seeded_and_loses_nothing(tmp_path: Path, corpus: Dict[int, str]) -> None:
    def ids(seed: int) -> List[int]:
        return [r["id"] for r in nr.Files.in_dir(str(tmp_path)).read_jsonl().shuffle(16, seed)]

    assert sorted(ids(1)) == sorted(corpus)
    assert ids(1) == ids(1)
    assert ids(1) != ids(2)


@pytest.mark.parametrize("midpoint", [0, 3, 11])
def test_a_packed_file_pipeline_resumes_exactly(tmp_path: Path, corpus: Dict[int, str], midpoint: int) -> None:
    def make() -> nr.Pipeline:
        files = nr.Files.in_dir(str(tmp_path)).shuffle_files(seed=4)
        tokens = files.interleave("jsonl", cycle_length=2).tokenize(vocab_size=50).shuffle(8, seed=9)
        return tokens.pack(12).batch(3).map(lambda b: b.tolist())

    save_load_round_trip(make, midpoint)


def test_a_weighted_mix_of_files_resumes_exactly(tmp_path: Path, corpus: Dict[int, str]) -> None:
    def make() -> nr.Pipeline:
        a = nr.Files.list([str(tmp_path / f"part0{i}.jsonl") for i in range(3)]).read_jsonl()
        b = nr.Files.list([str(tmp_path / f"part0{i}.jsonl") for i in range(3, 5)]).read_jsonl()
        return nr.weighted({"a": a, "b": b}, {"a": 0.8, "b": 0.2}, seed=3).map(lambda r: r["id"])

    everything = list(make())
    assert sorted(everything) == sorted(corpus)
    save_load_round_trip(make, 25)


def test_skip_drops_bad_records_and_deliver_raises_them(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": 1}\nnot json\n{"id": 2}\n')
    kept = list(nr.Files.in_dir(str(tmp_path)).read_jsonl(on_error="skip"))
    assert [r["id"] for r in kept] == [1, 2]
    with pytest.raises(nr.NodesError, match="a.jsonl:2"):
        list(nr.Files.in_dir(str(tmp_path)).read_jsonl())
    with pytest.raises(nr.NodesError):
        list(nr.Files.in_dir(str(tmp_path)).read_jsonl(on_error="skip", max_errors=0))
    with pytest.raises(ValueError, match="unknown on_error"):
        nr.Files.in_dir(str(tmp_path)).read_jsonl(on_error="ignore")


def test_two_ranks_resume_on_three_exactly_once(tmp_path: Path) -> None:
    write_corpus(tmp_path, files=7, records=30)

    def loader(rank: int, world: int) -> nr.Loader[Any]:
        files = nr.Files.in_dir(str(tmp_path)).shuffle_files(seed=5).shard(rank, world)
        return nr.Loader(files.read_jsonl().shuffle(8, seed=2).batch(4))

    loader(0, 3).check_elastic()
    counts, states = ids_over_two_then_three_ranks(loader, lambda rank: 5 + 2 * rank)
    # Loaded plainly, another world size's state is refused, naming the call.
    with pytest.raises(ValueError, match="from a job of 2 ranks, this one has 3.*Loader.load_resharded"):
        loader(0, 3).load_state_dict(states[0])
    assert len(counts) == 210 and max(counts.values()) == 1
    again = nr.reshard(states, 3)
    assert len(again) == 3


def test_a_flat_map_part_way_through_a_record_reshards_exactly_once(tmp_path: Path) -> None:
    write_corpus(tmp_path, files=7, records=30)

    def split(record: Dict[str, Any]) -> List[Dict[str, Any]]:
        return [{"id": 3 * record["id"] + part} for part in range(3)]

    def loader(rank: int, world: int) -> nr.Loader[Any]:
        files = nr.Files.in_dir(str(tmp_path)).shuffle_files(seed=5).shard(rank, world)
        return nr.Loader(files.read_jsonl().flat_map(split).batch(4))

    loader(0, 3).check_elastic()
    # 5 and 7 batches of 4 stop part way through a record's three parts.
    counts, _ = ids_over_two_then_three_ranks(loader, lambda rank: 5 + 2 * rank)
    assert len(counts) == 630 and max(counts.values()) == 1


def test_an_out_of_order_par_map_over_a_reader_reshards_exactly_once(tmp_path: Path) -> None:
    write_corpus(tmp_path, files=7, records=30)

    def uneven(record: Dict[str, Any]) -> Dict[str, Any]:
        if record["id"] % 3 == 0:
            # Load only: what is asserted holds in any completion order.
            time.sleep(0.0003)
        return record

    def loader(rank: int, world: int) -> nr.Loader[Any]:
        files = nr.Files.in_dir(str(tmp_path)).shuffle_files(seed=5).shard(rank, world)
        return nr.Loader(files.read_jsonl().par_map(uneven, 2, in_order=False).batch(4))

    loader(0, 3).check_elastic()
    counts, _ = ids_over_two_then_three_ranks(loader, lambda rank: 5 + 2 * rank)
    assert len(counts) == 210 and max(counts.values()) == 1


def test_a_cycling_mix_reshards_each_first_run(tmp_path: Path) -> None:
    big, small = tmp_path / "big", tmp_path / "small"
    big.mkdir()
    small.mkdir()
    write_corpus(big, files=7, records=30)
    write_corpus(small, files=2, records=2)

    def loader(rank: int, world: int) -> nr.Loader[Any]:
        def files(d: Path, seed: int) -> nr.Pipeline:
            return nr.Files.in_dir(str(d)).shuffle_files(seed=seed).shard(rank, world).read_jsonl()

        a = files(big, 5)
        b = files(small, 6).map(lambda r: {"id": 100_000 + r["id"]})
        weights = {"a": 0.5, "b": 0.5}
        cycling = "CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED"
        mix = nr.weighted({"a": a, "b": b}, weights, seed=3, stop_criteria=cycling, rank=rank, world_size=world)
        return nr.Loader(mix.batch(4))

    loader(0, 3).check_elastic()
    with pytest.raises(ValueError, match="both rank and world_size"):
        nr.weighted({"a": nr.Files.in_dir(str(big)).read_jsonl()}, {"a": 1.0}, rank=0)
    counts, states = ids_over_two_then_three_ranks(loader, lambda rank: 5 + 2 * rank)
    # The small source ended and restarted on the old ranks; the big one
    # never ends before the pass does, so its first run is all it reads.
    assert all("dataset_first_pass_ends" in json.dumps(s) for s in states)
    big_ids = [i for i in counts if i < 100_000]
    assert len(big_ids) == 210 and max(counts[i] for i in big_ids) == 1
    assert {i - 100_000 for i in counts if i >= 100_000} == {0, 1, 1000, 1001}


def test_a_reshard_can_keep_the_global_batch(tmp_path: Path) -> None:
    write_corpus(tmp_path, files=7, records=30)

    def loader(rank: int, world: int, batch_size: int) -> nr.Loader[Any]:
        files = nr.Files.in_dir(str(tmp_path)).shuffle_files(seed=5).shard(rank, world)
        return nr.Loader(files.read_jsonl().shuffle(8, seed=2).batch(batch_size))

    # Two ranks of 6: a global batch of 12.
    seen: List[int] = []
    states = []
    for rank in range(2):
        old = loader(rank, 2, 6)
        it = iter(old)
        for _ in range(rank + 2):
            seen += [r["id"] for r in next(it)]
        states.append(old.state_dict())
    assert nr.new_batch_size(states, 0, 3) == 6
    with pytest.raises(ValueError, match="12 items does not divide among 5 ranks: 4 or 6 ranks do"):
        nr.reshard(states, 5, batch_sizes="keep_global")
    with pytest.raises(ValueError, match="unknown batch_sizes"):
        nr.reshard(states, 3, batch_sizes="global")
    sizes = [nr.new_batch_size(states, rank, 5, batch_sizes="keep_global_uneven") for rank in range(5)]
    assert sizes == [3, 3, 2, 2, 2]
    # Three ranks of 4 keep it, to the end of the epoch.
    for rank in range(3):
        size = nr.new_batch_size(states, rank, 3, batch_sizes="keep_global")
        assert size is not None and size == 4
        new = loader(rank, 3, size)
        new.load_resharded(states, rank, 3, batch_sizes="keep_global")
        batches = list(new)
        assert all(len(b) == 4 for b in batches[:-1])
        seen += [r["id"] for batch in batches for r in batch]
    counts = collections.Counter(seen)
    assert len(counts) == 210 and max(counts.values()) == 1


def test_a_changed_pipeline_is_refused_unless_check_shape_is_off(tmp_path: Path, corpus: Dict[int, str]) -> None:
    def loader(batch_size: int, **options: Any) -> nr.Loader[Any]:
        return nr.Loader(nr.Files.in_dir(str(tmp_path)).read_jsonl().batch(batch_size), **options)

    old = loader(4)
    it = iter(old)
    first = [r["id"] for _ in range(5) for r in next(it)]
    state = old.state_dict()
    with pytest.raises(ValueError, match="Batcher.*check_shape=False"):
        loader(5).load_state_dict(state)
    # A new batch size, deliberately: the records go on where they stopped.
    new = loader(5, check_shape=False)
    new.load_state_dict(state)
    rest = [r["id"] for batch in new for r in batch]
    assert first + rest == sorted(corpus)


def test_a_python_node_between_native_stages(tmp_path: Path, corpus: Dict[int, str]) -> None:
    class Upper(tn.BaseNode[Dict[str, Any]]):
        def __init__(self, source: tn.BaseNode[Dict[str, Any]]) -> None:
            super().__init__()
            self.source = source

        def reset(self, initial_state: Optional[Dict[str, Any]] = None) -> None:
            super().reset(initial_state)
            self.source.reset(initial_state["source"] if initial_state else None)

        def next(self) -> Dict[str, Any]:
            record: Dict[str, Any] = next(self.source)
            return {"id": record["id"], "text": record["text"].upper()}

        def get_state(self) -> Dict[str, Any]:
            return {"source": self.source.state_dict()}

    def make() -> nr.Pipeline:
        records = nr.Files.in_dir(str(tmp_path)).read_jsonl()
        return nr.source(Upper(records)).tokenize(tokenizer="bytes").map(lambda t: t.tolist())

    first = next(iter(make()))
    assert first == list(corpus[0].upper().encode())
    save_load_round_trip(make, 9)


def test_a_python_state_that_is_not_json_is_named(tmp_path: Path) -> None:
    class Opaque(tn.BaseNode[int]):
        def reset(self, initial_state: Optional[Dict[str, Any]] = None) -> None:
            super().reset(initial_state)

        def next(self) -> int:
            return 1

        def get_state(self) -> Dict[str, Any]:
            return {"position": {"file": object()}}

    loader = nr.Loader(tn.Header(Opaque(), 3))
    next(iter(loader))
    with pytest.raises(ValueError, match=r"Opaque.*object.*/position/file"):
        loader.state_dict()


@pytest.mark.timeout(120)
def test_native_stages_release_the_gil() -> None:
    """The source waits, on the prefetch thread, for an event only a second
    Python thread sets; that thread can run only while the consumer, blocked
    in the native ``next``, does not hold the GIL."""
    started, release = threading.Event(), threading.Event()

    class Gated:
        def __iter__(self) -> Iterator[int]:
            started.set()
            release.wait()
            yield 7

    def opener() -> None:
        started.wait()
        release.set()

    helper = threading.Thread(target=opener)
    helper.start()
    assert next(tn.Prefetcher(tn.IterableWrapper(Gated()), 1)) == 7
    helper.join()


def test_describe_and_stats(tmp_path: Path, corpus: Dict[int, str]) -> None:
    pipeline = nr.Files.in_dir(str(tmp_path)).read_jsonl(on_error="skip").tokenize().batch(16)
    loader = nr.Loader(pipeline, record_stats=True)
    assert "ReadJsonl" in loader.describe()
    batches = list(loader)
    rows = loader.stats()
    assert rows is not None
    by_name = {row["name"]: row for row in rows}
    assert by_name["ReadJsonl"]["items"] == len(corpus)
    assert by_name["Batcher"]["items"] == len(batches)
    assert nr.Loader(nr.Files.in_dir(str(tmp_path)).read_jsonl()).stats() is None
