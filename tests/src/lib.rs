//! Tests live in `tests/tests` and `tests/ui`. This library holds only the
//! doctests of the README and the guides.

// The README's and the guides' Rust examples run as doctests.
#[cfg(doctest)]
mod guides {
    macro_rules! guides {
        ($($name:ident = $path:literal),*) => { $(#[doc = include_str!($path)] mod $name {})* };
    }
    guides!(
        readme = "../../README.md",
        architecture = "../../docs/architecture.md",
        checkpointing = "../../docs/checkpointing.md",
        custom_nodes = "../../docs/custom-nodes.md",
        distributed = "../../docs/distributed.md",
        elastic = "../../docs/elastic.md",
        errors = "../../docs/errors.md",
        files = "../../docs/files.md",
        logging = "../../docs/logging.md",
        size_hints = "../../docs/size-hints.md",
        testing = "../../docs/testing.md",
        threads = "../../docs/threads.md",
        torchdata = "../../docs/torchdata.md"
    );
}
