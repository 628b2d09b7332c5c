//! Tests live in `tests/tests` and `tests/ui`; this library is empty.
