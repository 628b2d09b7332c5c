"""Parquet files and object-store URLs from Python: the nodes-std readers
behind ``Files``, over Parquet written by pyarrow and over objects of the S3
server ``.ci/run`` starts (``NODES_S3_ENDPOINT``). Without that variable the
S3 tests print a note and skip, unless ``NODES_REQUIRE_S3`` is set."""

import gzip
import json
import os
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

import nodes_rs as nr
from conftest import ids_over_two_then_three_ranks, save_load_round_trip


def rows_of(file: int, count: int) -> List[Dict[str, Any]]:
    """Rows ``{"id", "text", "score"}``, every third score missing."""
    return [
        {
            "id": file * 1000 + i,
            "text": f"file {file} row {i}",
            "score": None if i % 3 == 0 else i / 4,
        }
        for i in range(count)
    ]


def write_parquet(path: Path, rows: List[Dict[str, Any]], row_group_size: int = 7) -> None:
    pq.write_table(pa.Table.from_pylist(rows), str(path), row_group_size=row_group_size)


@pytest.fixture
def parquet_dir(tmp_path: Path) -> Dict[int, Dict[str, Any]]:
    """Four Parquet files of 20 rows in row groups of 7; returns rows by id."""
    by_id: Dict[int, Dict[str, Any]] = {}
    for f in range(4):
        rows = rows_of(f, 20)
        write_parquet(tmp_path / f"part{f}.parquet", rows)
        by_id.update((row["id"], row) for row in rows)
    return by_id


def test_parquet_rows_are_dicts_in_file_order(tmp_path: Path, parquet_dir: Dict[int, Dict[str, Any]]) -> None:
    rows = list(nr.Files.in_dir(str(tmp_path)).read_parquet())
    assert rows == [parquet_dir[i] for i in sorted(parquet_dir)]


@pytest.mark.parametrize("midpoint", [0, 6, 17])
def test_interleaved_shuffled_parquet_resumes_exactly(
    tmp_path: Path, parquet_dir: Dict[int, Dict[str, Any]], midpoint: int
) -> None:
    def make() -> nr.Pipeline:
        files = nr.Files.in_dir(str(tmp_path)).shuffle_files(seed=2)
        return files.interleave("parquet", cycle_length=2, block_length=3).shuffle(5, seed=8).batch(4)

    assert sorted(row["id"] for batch in make() for row in batch) == sorted(parquet_dir)
    save_load_round_trip(make, midpoint)


def test_a_parquet_file_changed_under_a_saved_state_is_named(
    tmp_path: Path, parquet_dir: Dict[int, Dict[str, Any]]
) -> None:
    loader = nr.Loader(nr.Files.in_dir(str(tmp_path)).read_parquet())
    it = iter(loader)
    for _ in range(9):
        next(it)
    state = loader.state_dict()
    write_parquet(tmp_path / "part0.parquet", rows_of(9, 20))
    resumed = nr.Loader(nr.Files.in_dir(str(tmp_path)).read_parquet())
    with pytest.raises((ValueError, nr.NodesError), match="part0.parquet.*changed"):
        resumed.load_state_dict(state)
        next(iter(resumed))


def test_parquet_columns_are_the_only_ones_read(tmp_path: Path, parquet_dir: Dict[int, Dict[str, Any]]) -> None:
    files = nr.Files.in_dir(str(tmp_path))
    rows = list(files.read_parquet(columns=["text", "id"]))
    assert rows == [{"id": i, "text": parquet_dir[i]["text"]} for i in sorted(parquet_dir)]
    scores = list(nr.Files.in_dir(str(tmp_path)).interleave("parquet", cycle_length=3, columns=("score",)))
    assert all(row.keys() == {"score"} for row in scores)
    assert sorted(scores, key=repr) == sorted(({"score": row["score"]} for row in parquet_dir.values()), key=repr)


def test_parquet_columns_that_do_not_fit_are_named(tmp_path: Path, parquet_dir: Dict[int, Dict[str, Any]]) -> None:
    missing = nr.Files.in_dir(str(tmp_path)).read_parquet(columns=["id", "title"])
    with pytest.raises(nr.NodesError, match=r"part0\.parquet.*no column `title`"):
        next(iter(missing))
    files = nr.Files.in_dir(str(tmp_path))
    with pytest.raises(TypeError, match="not the string 'text'"):
        files.read_parquet(columns="text")
    with pytest.raises(ValueError, match="at least one column"):
        files.read_parquet(columns=[])
    with pytest.raises(ValueError, match='columns goes with the "parquet" reader'):
        files.interleave("jsonl", columns=["text"])


def test_parquet_on_two_ranks_resumes_on_three_exactly_once(tmp_path: Path) -> None:
    for f in range(7):
        write_parquet(tmp_path / f"part{f}.parquet", rows_of(f, 30), row_group_size=8)

    def loader(rank: int, world: int) -> nr.Loader[Any]:
        files = nr.Files.in_dir(str(tmp_path)).shuffle_files(seed=5).shard(rank, world)
        return nr.Loader(files.read_parquet().shuffle(8, seed=2).batch(4))

    counts, _ = ids_over_two_then_three_ranks(loader, lambda rank: 4 + 3 * rank)
    assert len(counts) == 210 and max(counts.values()) == 1


class Bucket:
    """A bucket of its own on the S3 server at ``endpoint``, filled by
    unsigned PUTs (the test server accepts them)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.name = f"nodes-py-{uuid.uuid4().hex[:12]}"
        self._put(f"/{self.name}", b"")

    def _put(self, path: str, body: bytes) -> None:
        # Not urllib's default form type, which the server would try to parse.
        headers = {"Content-Type": "application/octet-stream"}
        request = urllib.request.Request(self.endpoint + path, data=body, headers=headers, method="PUT")
        with urllib.request.urlopen(request) as reply:
            assert reply.status == 200, f"PUT {path}: {reply.status}"

    def upload(self, key: str, body: bytes) -> str:
        self._put(f"/{self.name}/{key}", body)
        return f"s3://{self.name}/{key}"


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[Bucket]:
    endpoint = os.environ.get("NODES_S3_ENDPOINT")
    if not endpoint:
        if os.environ.get("NODES_REQUIRE_S3"):
            pytest.fail("NODES_REQUIRE_S3 is set but NODES_S3_ENDPOINT is not: the S3 tests cannot run")
        print("note: NODES_S3_ENDPOINT is unset: this S3 test is skipped")
        pytest.skip("NODES_S3_ENDPOINT is unset")
    # The readers' store takes its endpoint and credentials from here.
    for key, value in {
        "AWS_ENDPOINT": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    yield Bucket(endpoint)


def jsonl(rows: List[Dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def test_s3_jsonl_gzip_and_parquet_objects_read_and_resume(bucket: Bucket, tmp_path: Path) -> None:
    expected: Dict[int, Dict[str, Any]] = {}
    for f in range(3):
        rows = rows_of(f, 25)
        expected.update((row["id"], row) for row in rows)
        body = jsonl(rows)
        bucket.upload(f"corpus/part{f}.jsonl" + (".gz" if f == 1 else ""), gzip.compress(body) if f == 1 else body)
    listed = list(nr.Files.in_dir(f"s3://{bucket.name}/corpus/").read_jsonl())
    assert listed == [expected[i] for i in sorted(expected)]

    def make() -> nr.Pipeline:
        files = nr.Files.in_dir(f"s3://{bucket.name}/corpus/").shuffle_files(seed=3)
        return files.interleave("jsonl", cycle_length=2).shuffle(6, seed=1).batch(5)

    save_load_round_trip(make, 7)

    write_parquet(tmp_path / "rows.parquet", rows_of(7, 30))
    url = bucket.upload("rows.parquet", (tmp_path / "rows.parquet").read_bytes())
    assert list(nr.Files.list([url]).read_parquet()) == rows_of(7, 30)
    save_load_round_trip(lambda: nr.Files.list([url]).read_parquet().batch(4), 3)


def test_an_object_changed_under_a_saved_state_is_named(bucket: Bucket) -> None:
    # The server refuses unsigned overwrites: the data moves to a new prefix,
    # which a state (relative paths) follows, once with its bytes and once
    # with other bytes.
    rows = rows_of(0, 40)
    bucket.upload("v1/data.jsonl", jsonl(rows))
    bucket.upload("moved/data.jsonl", jsonl(rows))
    bucket.upload("changed/data.jsonl", jsonl(rows_of(1, 40)))

    def loader(prefix: str) -> nr.Loader[Any]:
        return nr.Loader(nr.Files.in_dir(f"s3://{bucket.name}/{prefix}/").read_jsonl())

    first = loader("v1")
    it = iter(first)
    assert [next(it)["id"] for _ in range(10)] == list(range(10))
    state = first.state_dict()
    moved = loader("moved")
    moved.load_state_dict(state)
    assert [r["id"] for r in moved] == list(range(10, 40))
    changed = loader("changed")
    with pytest.raises((ValueError, nr.NodesError), match="data.jsonl.*changed"):
        changed.load_state_dict(state)
        next(iter(changed))
