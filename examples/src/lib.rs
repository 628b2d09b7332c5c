//! Examples live in this crate's `[[example]]` targets; this library is empty.
