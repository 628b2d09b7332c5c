//! The functions that build native nodes over Python items: each takes its
//! source (a native pipeline, which it takes, or a Python node, which it
//! wraps) and returns a new [`Pipeline`].

use std::collections::HashMap;

use nodes_std::CancelHandle;
use nodes_std::prelude::*;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{Obj, attached, to_py_err};
use crate::handle::{BoxNode, Pipeline, cancels_of, source};
use crate::item::Item;
use crate::python_nodes::{Epochs, PyFilter, PySource};

/// Calls a Python callable on one item, attached for that call.
pub(crate) fn call(f: &Obj, item: Item) -> PyResult<Item> {
    attached(|py| f.call1(py, (item.into_py(py)?,)).map(Item::Py))
}

pub(crate) fn built(node: impl Node<Item = Item> + 'static) -> Pipeline {
    Pipeline::new(Box::new(node))
}

pub(crate) fn checked<N: Node<Item = Item> + 'static>(
    node: nodes_std::Result<N>,
) -> PyResult<Pipeline> {
    node.map(built).map_err(to_py_err)
}

/// A source over a Python iterable (torchdata's `IterableWrapper`).
#[pyfunction]
pub(crate) fn iterable(iterable: Obj) -> Pipeline {
    built(PySource::new("IterableWrapper", iterable, Epochs::None))
}

/// A source over a sampler whose epoch it counts (torchdata's
/// `SamplerWrapper`): `set_epoch(epoch)` at each pass, the epoch moving
/// on by `epoch_updater` (default: one) after a pass that started.
#[pyfunction]
#[pyo3(signature = (sampler, initial_epoch=0, epoch_updater=None))]
pub(crate) fn sampler(sampler: Obj, initial_epoch: i64, epoch_updater: Option<Obj>) -> Pipeline {
    let epochs = Epochs::Counted {
        epoch: initial_epoch,
        started: false,
        updater: epoch_updater,
    };
    built(PySource::new("SamplerWrapper", sampler, epochs))
}

/// A Python `BaseNode` subclass as a native pipeline, to chain native
/// stages onto.
#[pyfunction]
pub(crate) fn python_node(node: &Bound<'_, PyAny>) -> PyResult<Pipeline> {
    Ok(built(crate::python_nodes::PyNode::new(node)?))
}

/// Each item through `f` (a raised exception is the item's error).
#[pyfunction]
pub(crate) fn map(source_node: &Bound<'_, PyAny>, f: Obj) -> PyResult<Pipeline> {
    let node = source(source_node, "Mapper")?;
    Ok(built(node.try_map(move |item| call(&f, item))).with_cancels(cancels_of(source_node)))
}

/// Each item through `f` on `num_workers` threads.
#[pyfunction]
#[pyo3(signature = (source_node, f, num_workers, in_order=true, max_concurrent=None, snapshot_frequency=None, prebatch=None))]
pub(crate) fn par_map(
    source_node: &Bound<'_, PyAny>,
    f: Obj,
    num_workers: usize,
    in_order: bool,
    max_concurrent: Option<usize>,
    snapshot_frequency: Option<usize>,
    prebatch: Option<usize>,
) -> PyResult<Pipeline> {
    let node = source(source_node, "ParallelMapper")?;
    let mut options = ParallelOptions::new(num_workers).in_order(in_order);
    if let Some(n) = max_concurrent {
        options = options.max_concurrent(n);
    }
    if let Some(n) = snapshot_frequency {
        options = options.snapshot_frequency(n);
    }
    if let Some(k) = prebatch {
        options = options.prebatch(k);
    }
    let mapped = node
        .par_map(move |item| call(&f, item).map_err(Into::into), options)
        .map_err(to_py_err)?;
    let own = mapped.cancel_handle();
    Ok(built(mapped).with_cancels(cancels_of(source_node).into_iter().chain([own])))
}

/// The items for which `f` returns a true value.
#[pyfunction]
pub(crate) fn filter(source_node: &Bound<'_, PyAny>, f: Obj) -> PyResult<Pipeline> {
    let node = source(source_node, "Filter")?;
    Ok(built(PyFilter::new(node, f)).with_cancels(cancels_of(source_node)))
}

/// Lists of `batch_size` items; a shorter last one unless `drop_last`.
#[pyfunction]
#[pyo3(signature = (source_node, batch_size, drop_last=true))]
pub(crate) fn batch(
    source_node: &Bound<'_, PyAny>,
    batch_size: usize,
    drop_last: bool,
) -> PyResult<Pipeline> {
    let node = source(source_node, "Batcher")?;
    let batches = if drop_last {
        node.batch_exact(batch_size)
    } else {
        node.batch(batch_size)
    };
    let batches = built(batches.map_err(to_py_err)?.map(Item::List));
    Ok(batches.with_cancels(cancels_of(source_node)))
}

/// The elements of each item (an iterable), in order.
#[pyfunction]
pub(crate) fn unbatch(source_node: &Bound<'_, PyAny>) -> PyResult<Pipeline> {
    let node = source(source_node, "Unbatcher")?;
    let elements = built(node.try_map(Item::into_elements).unbatch());
    Ok(elements.with_cancels(cancels_of(source_node)))
}

/// The first `n` items.
#[pyfunction]
pub(crate) fn header(source_node: &Bound<'_, PyAny>, n: u64) -> PyResult<Pipeline> {
    let first = built(source(source_node, "Header")?.header(n));
    Ok(first.with_cancels(cancels_of(source_node)))
}

/// The source again and again (at most `max_cycles` passes).
#[pyfunction]
#[pyo3(signature = (source_node, max_cycles=None))]
pub(crate) fn cycle(source_node: &Bound<'_, PyAny>, max_cycles: Option<u64>) -> PyResult<Pipeline> {
    let node = source(source_node, "Cycler")?;
    let cycled = match max_cycles {
        None => built(node.cycle()),
        Some(n) => checked(node.cycle_n(n))?,
    };
    Ok(cycled.with_cancels(cancels_of(source_node)))
}

/// Reads up to `prefetch_factor` items ahead on a thread of its own.
#[pyfunction]
pub(crate) fn prefetch(
    source_node: &Bound<'_, PyAny>,
    prefetch_factor: usize,
) -> PyResult<Pipeline> {
    let prefetched = source(source_node, "Prefetcher")?
        .prefetch(prefetch_factor)
        .map_err(to_py_err)?;
    let own = prefetched.cancel_handle();
    Ok(built(prefetched).with_cancels(cancels_of(source_node).into_iter().chain([own])))
}

/// The stop criterion named as torchdata names it.
fn stop_criteria(name: &str) -> PyResult<StopCriteria> {
    StopCriteria::ALL
        .into_iter()
        .find(|c| c.as_str() == name)
        .ok_or_else(|| {
            let names: Vec<_> = StopCriteria::ALL.iter().map(|c| c.as_str()).collect();
            PyValueError::new_err(format!(
                "unknown stop criterion {name:?}: expected one of {}",
                names.join(", ")
            ))
        })
}

/// A mix's source and its name.
type Named = (String, BoxNode);

/// The named sources of a mix, each taken into `parent`, and their
/// cancel handles.
fn sources(nodes: &Bound<'_, PyDict>, parent: &str) -> PyResult<(Vec<Named>, Vec<CancelHandle>)> {
    let mut cancels = Vec::new();
    let mut named = Vec::new();
    for (name, node) in nodes.iter() {
        cancels.extend(cancels_of(&node));
        named.push((name.extract::<String>()?, source(&node, parent)?));
    }
    Ok((named, cancels))
}

/// Items of the named sources, drawn by weight with a seeded generator.
#[pyfunction]
#[pyo3(signature = (source_nodes, weights, stop_criteria_name, rank=None, world_size=None, seed=0, tag_output=false))]
pub(crate) fn weighted(
    source_nodes: &Bound<'_, PyDict>,
    weights: HashMap<String, f64>,
    stop_criteria_name: &str,
    rank: Option<u64>,
    world_size: Option<u64>,
    seed: u64,
    tag_output: bool,
) -> PyResult<Pipeline> {
    let stop = stop_criteria(stop_criteria_name)?;
    let (nodes, cancels) = sources(source_nodes, "MultiNodeWeightedSampler")?;
    let mut mix = MultiNodeWeightedSampler::new(nodes, weights)
        .map_err(to_py_err)?
        .stop_criteria(stop)
        .seed(seed);
    if let (Some(rank), Some(world_size)) = (rank, world_size) {
        mix = mix.rank(rank, world_size).map_err(to_py_err)?;
    }
    if tag_output {
        // torchdata adds the key to a dict item, and wraps any other item.
        let tagged = built(mix.tagged().try_map(|t| tag(t, true)));
        return Ok(tagged.with_cancels(cancels));
    }
    Ok(built(mix).with_cancels(cancels))
}

/// A mix's item with its source's name, as torchdata's `tag_output` gives
/// it: `{"dataset_key": name, "data": item}`, or for a dict item when
/// `into_dicts`, the dict itself with the `dataset_key` key added.
fn tag(tagged: Tagged<Item>, into_dicts: bool) -> PyResult<Item> {
    attached(|py| {
        let item = tagged.item.into_py(py)?;
        let item = item.bind(py);
        if into_dicts && let Ok(dict) = item.cast::<PyDict>() {
            dict.set_item("dataset_key", &*tagged.source)?;
            return Ok(Item::Py(item.clone().unbind()));
        }
        let wrapped = PyDict::new(py);
        wrapped.set_item("dataset_key", &*tagged.source)?;
        wrapped.set_item("data", item)?;
        Ok(Item::Py(wrapped.into_any().unbind()))
    })
}

/// Items of the named sources in turn.
#[pyfunction]
#[pyo3(signature = (source_nodes, stop_criteria_name, tag_output=false))]
pub(crate) fn round_robin(
    source_nodes: &Bound<'_, PyDict>,
    stop_criteria_name: &str,
    tag_output: bool,
) -> PyResult<Pipeline> {
    let stop = stop_criteria(stop_criteria_name)?;
    let (nodes, cancels) = sources(source_nodes, "MultiNodeRoundRobinSampler")?;
    let mix = MultiNodeRoundRobinSampler::new(nodes)
        .map_err(to_py_err)?
        .stop_criteria(stop);
    if tag_output {
        let tagged = built(mix.tagged().try_map(|t| tag(t, false)));
        return Ok(tagged.with_cancels(cancels));
    }
    Ok(built(mix).with_cancels(cancels))
}
