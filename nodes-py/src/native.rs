//! The Rust-native stages from Python: files and their readers, tokenizing,
//! shuffling, packing and the rest, whose items stay in Rust until they
//! reach Python (token batches as one numpy array each).

use std::path::PathBuf;

use nodes_std::Fnv1a64;
use nodes_std::prelude::*;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::de::DeserializeSeed;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::builders::{built, call, checked};
use crate::convert::{Obj, attached, to_py_err};
use crate::handle::{BoxNode, Pipeline, cancels_of, source};
use crate::item::{Item, TextField, field_of};

/// The error policy named in Python: `deliver`, `fail` or `skip` (with
/// `max_errors`, skip at most that many).
fn policy(on_error: &str, max_errors: Option<u64>) -> PyResult<ErrorPolicy> {
    Ok(match (on_error, max_errors) {
        ("deliver", None) => ErrorPolicy::Deliver,
        ("fail", None) => ErrorPolicy::Fail,
        ("skip", None) => ErrorPolicy::Skip,
        ("skip", Some(n)) => ErrorPolicy::SkipAtMost(n),
        (name, Some(_)) if ["deliver", "fail"].contains(&name) => {
            return Err(PyValueError::new_err(format!(
                "max_errors goes with on_error=\"skip\", not {name:?}"
            )));
        }
        (other, _) => {
            return Err(PyValueError::new_err(format!(
                "unknown on_error {other:?}: expected \"deliver\", \"fail\" or \"skip\""
            )));
        }
    })
}

/// The list of files: `kind` is `in_dir`, `glob` or `list`.
fn files(kind: &str, paths: Vec<String>, shuffle_seed: Option<u64>) -> PyResult<Files> {
    let files = match (kind, paths.as_slice()) {
        ("in_dir", [dir]) => Files::in_dir(dir),
        ("glob", [pattern]) => Files::glob(pattern),
        ("list", _) => Files::list(paths),
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown list of files {kind:?}"
            )));
        }
    }
    .map_err(to_py_err)?;
    Ok(match shuffle_seed {
        Some(seed) => files.shuffle_files(seed),
        None => files,
    })
}

/// How the list of files is split among ranks.
#[derive(FromPyObject)]
pub(crate) enum Sharding {
    /// `(rank, world_size)`.
    Explicit(u64, u64),
    /// `"env"`: from `RANK` and `WORLD_SIZE`.
    Env(String),
}

/// The records of the files, read by `reader` (`lines`, `jsonl` or
/// `parquet`), rank-sharded by file when `shard` is given; with
/// `cycle_length` set, `cycle_length` files are read at a time,
/// `block_length` records from each in turn. With `field`, a JSON record
/// is the text at that field, parsed in the one pass over the line. With
/// `columns`, a Parquet row holds only those top-level columns.
#[pyfunction]
#[pyo3(signature = (kind, paths, reader, shuffle_seed=None, shard=None, on_error="deliver", max_errors=None, cycle_length=None, block_length=1, field=None, columns=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_files(
    kind: &str,
    paths: Vec<String>,
    reader: &str,
    shuffle_seed: Option<u64>,
    shard: Option<Sharding>,
    on_error: &str,
    max_errors: Option<u64>,
    cycle_length: Option<usize>,
    block_length: usize,
    field: Option<String>,
    columns: Option<Vec<String>>,
) -> PyResult<Pipeline> {
    let policy = policy(on_error, max_errors)?;
    let reader = Reader::named(reader, field, columns)?;
    let files = files(kind, paths, shuffle_seed)?;
    let files: Box<dyn Node<Item = PathBuf>> = match shard {
        None => Box::new(files),
        Some(Sharding::Explicit(rank, world)) => {
            Box::new(files.shard(rank, world).map_err(to_py_err)?)
        }
        Some(Sharding::Env(name)) if name == "env" => {
            Box::new(files.shard_from_env().map_err(to_py_err)?)
        }
        Some(Sharding::Env(other)) => {
            return Err(PyValueError::new_err(format!(
                "shard is (rank, world_size) or \"env\", not {other:?}"
            )));
        }
    };
    match cycle_length {
        None => Ok(Pipeline::new(reader.read(files, policy))),
        Some(cycle_length) => {
            let one_file = move |path| {
                reader
                    .clone()
                    .read(Box::new(IterableWrapper::new([path])), policy)
            };
            checked(files.interleave(cycle_length, block_length, one_file))
        }
    }
}

/// How a file's records are read.
#[derive(Clone)]
enum Reader {
    Lines,
    /// Whole records, or the text at one field of each.
    Jsonl(Option<String>),
    /// Every column, or only these.
    Parquet(Option<Vec<String>>),
}

impl Reader {
    fn named(name: &str, field: Option<String>, columns: Option<Vec<String>>) -> PyResult<Reader> {
        let bad = |why: String| Err(PyValueError::new_err(why));
        match (name, field, columns) {
            ("lines" | "parquet", Some(_), _) => bad(format!(
                "field goes with the \"jsonl\" reader, not {name:?}"
            )),
            ("lines" | "jsonl", _, Some(_)) => bad(format!(
                "columns goes with the \"parquet\" reader, not {name:?}"
            )),
            ("parquet", None, Some(columns)) if columns.is_empty() => {
                bad("columns: name at least one column, or pass None for all".to_owned())
            }
            ("lines", None, None) => Ok(Reader::Lines),
            ("jsonl", field, None) => Ok(Reader::Jsonl(field)),
            ("parquet", None, columns) => Ok(Reader::Parquet(columns)),
            (other, _, _) => bad(format!(
                "unknown reader {other:?}: expected \"lines\", \"jsonl\" or \"parquet\""
            )),
        }
    }

    fn read(self, files: Box<dyn Node<Item = PathBuf>>, policy: ErrorPolicy) -> BoxNode {
        match self {
            Reader::Lines => Box::new(files.read_lines().on_error(policy).map(Item::Text)),
            Reader::Jsonl(None) => {
                let records = files.read_jsonl::<Box<RawValue>>().on_error(policy);
                Box::new(records.map(Item::Raw))
            }
            Reader::Jsonl(Some(field)) => {
                let text = files.read_jsonl_with(move |line| TextField(&field).deserialize(line));
                Box::new(text.on_error(policy))
            }
            Reader::Parquet(columns) => {
                let rows = files.read_parquet::<Value>();
                let rows = match columns {
                    Some(columns) => rows.columns(columns),
                    None => rows,
                };
                Box::new(rows.on_error(policy).map(|row| Item::Json(Box::new(row))))
            }
        }
    }
}

/// Token ids of each record's text: `field` of a JSON record (or the whole
/// line of text), split by `tokenizer`: `words` (FNV-1a of each
/// whitespace-separated word, modulo `vocab_size`) or `bytes` (the UTF-8
/// bytes).
#[pyfunction]
#[pyo3(signature = (source_node, field="text", tokenizer="words", vocab_size=50_257))]
pub(crate) fn tokenize(
    source_node: &Bound<'_, PyAny>,
    field: &str,
    tokenizer: &str,
    vocab_size: u64,
) -> PyResult<Pipeline> {
    let words = match tokenizer {
        "words" => true,
        "bytes" => false,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown tokenizer {other:?}: expected \"words\" or \"bytes\""
            )));
        }
    };
    if vocab_size == 0 || vocab_size > u64::from(u32::MAX) + 1 {
        return Err(PyValueError::new_err(format!(
            "vocab_size must be in 1..=2^32, not {vocab_size}"
        )));
    }
    let field = field.to_owned();
    let node = source(source_node, "tokenize")?;
    Ok(built(node.try_map(move |item: Item| {
        let python_text;
        let raw_text;
        let text = match &item {
            Item::Raw(raw) => match field_of(raw, &field)? {
                Some(text) => {
                    raw_text = text;
                    &*raw_text
                }
                None => return Err(format!("the record has no string field {field:?}")),
            },
            Item::Text(line) => line.as_str(),
            Item::Json(record) => match record.get(&field) {
                Some(Value::String(text)) => text.as_str(),
                _ => return Err(format!("the record has no string field {field:?}")),
            },
            Item::Py(obj) => {
                python_text = python_text_of(obj, &field)?;
                python_text.as_str()
            }
            _ => return Err("tokenize reads lines of text or records".to_owned()),
        };
        let tokens = if words {
            text.split_whitespace()
                .map(|word| (Fnv1a64::hash(word.as_bytes()) % vocab_size) as u32)
                .collect()
        } else {
            text.bytes().map(u32::from).collect()
        };
        Ok(Item::Tokens(tokens))
    }))
    .with_cancels(cancels_of(source_node)))
}

/// The text of a Python item: a `str`, or the string at `field` of a dict.
fn python_text_of(obj: &Obj, field: &str) -> Result<String, String> {
    let text = attached(|py| {
        let obj = obj.bind(py);
        let text = match obj.cast::<pyo3::types::PyDict>() {
            Ok(record) => record.get_item(field)?,
            Err(_) => Some(obj.clone()),
        };
        Ok(text.and_then(|t| t.extract::<String>().ok()))
    })
    .map_err(|e| e.to_string())?;
    text.ok_or_else(|| format!("the item is neither a str nor a dict with a str at {field:?}"))
}

/// A seeded shuffle through a buffer of `buffer_size` items.
#[pyfunction]
pub(crate) fn shuffle(
    source_node: &Bound<'_, PyAny>,
    buffer_size: usize,
    seed: u64,
) -> PyResult<Pipeline> {
    let shuffled = checked(source(source_node, "shuffle")?.shuffle(buffer_size, seed))?;
    Ok(shuffled.with_cancels(cancels_of(source_node)))
}

/// Token sequences packed into rows of `seq_len` (the short last row kept,
/// or dropped when `exact`).
#[pyfunction]
#[pyo3(signature = (source_node, seq_len, exact=false))]
pub(crate) fn pack(
    source_node: &Bound<'_, PyAny>,
    seq_len: usize,
    exact: bool,
) -> PyResult<Pipeline> {
    let tokens = source(source_node, "pack")?.try_map(Item::into_tokens);
    let packed = if exact {
        tokens.pack_exact(seq_len)
    } else {
        tokens.pack(seq_len)
    };
    let packed = checked(packed.map(|p| p.map(Item::Tokens)))?;
    Ok(packed.with_cancels(cancels_of(source_node)))
}

/// The elements of the iterable `f` returns for each item.
#[pyfunction]
pub(crate) fn flat_map(source_node: &Bound<'_, PyAny>, f: Obj) -> PyResult<Pipeline> {
    let node = source(source_node, "flat_map")?;
    let expanded = node.try_map(move |item| call(&f, item)?.into_elements());
    Ok(built(expanded.unbatch()).with_cancels(cancels_of(source_node)))
}

/// What `f` returns for each item, `None` dropping the item.
#[pyfunction]
pub(crate) fn filter_map(source_node: &Bound<'_, PyAny>, f: Obj) -> PyResult<Pipeline> {
    let node = source(source_node, "filter_map")?;
    let mapped = node.try_map(move |item| {
        let out = call(&f, item)?;
        Ok::<_, PyErr>(match out {
            Item::Py(obj) if attached(|py| Ok(obj.is_none(py)))? => None,
            other => Some(other),
        })
    });
    Ok(built(mapped.filter_map(|item| item)).with_cancels(cancels_of(source_node)))
}

/// Every `world_size`-th item, from `rank`.
#[pyfunction]
pub(crate) fn shard(
    source_node: &Bound<'_, PyAny>,
    rank: u64,
    world_size: u64,
) -> PyResult<Pipeline> {
    let sharded = checked(source(source_node, "shard")?.shard(rank, world_size))?;
    Ok(sharded.with_cancels(cancels_of(source_node)))
}
