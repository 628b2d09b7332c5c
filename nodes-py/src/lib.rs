//! Python bindings (`nodes_rs._native`): native pipelines whose items are
//! Python objects, Python nodes inside them, and the loader. The Python
//! package `nodes_rs` builds torchdata.nodes' classes on these.

mod builders;
mod convert;
mod elastic;
mod handle;
mod interrupt;
mod item;
mod loader;
mod native;
mod python_nodes;

use pyo3::prelude::*;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("NodesError", m.py().get_type::<convert::NodesError>())?;
    m.add_class::<handle::Pipeline>()?;
    m.add("_interrupts", interrupt::Interrupts::default())?;
    m.add_class::<loader::PyLoader>()?;
    m.add_function(wrap_pyfunction!(builders::iterable, m)?)?;
    m.add_function(wrap_pyfunction!(builders::sampler, m)?)?;
    m.add_function(wrap_pyfunction!(builders::python_node, m)?)?;
    m.add_function(wrap_pyfunction!(builders::map, m)?)?;
    m.add_function(wrap_pyfunction!(builders::par_map, m)?)?;
    m.add_function(wrap_pyfunction!(builders::filter, m)?)?;
    m.add_function(wrap_pyfunction!(builders::batch, m)?)?;
    m.add_function(wrap_pyfunction!(builders::unbatch, m)?)?;
    m.add_function(wrap_pyfunction!(builders::header, m)?)?;
    m.add_function(wrap_pyfunction!(builders::cycle, m)?)?;
    m.add_function(wrap_pyfunction!(builders::prefetch, m)?)?;
    m.add_function(wrap_pyfunction!(builders::weighted, m)?)?;
    m.add_function(wrap_pyfunction!(builders::round_robin, m)?)?;
    m.add_function(wrap_pyfunction!(native::read_files, m)?)?;
    m.add_function(wrap_pyfunction!(native::tokenize, m)?)?;
    m.add_function(wrap_pyfunction!(native::shuffle, m)?)?;
    m.add_function(wrap_pyfunction!(native::pack, m)?)?;
    m.add_function(wrap_pyfunction!(native::flat_map, m)?)?;
    m.add_function(wrap_pyfunction!(native::filter_map, m)?)?;
    m.add_function(wrap_pyfunction!(native::shard, m)?)?;
    m.add_function(wrap_pyfunction!(elastic::reshard, m)?)?;
    m.add_function(wrap_pyfunction!(elastic::reshard_rank, m)?)?;
    m.add_function(wrap_pyfunction!(elastic::new_batch_size, m)?)?;
    Ok(())
}
