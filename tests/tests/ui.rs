//! Compile-time guarantees, pinned with trybuild: misuse that must not compile
//! (with the message it gives) and tricky inputs that must compile.
//!
//! Regenerate snapshots with `TRYBUILD=overwrite cargo test -p nodes-tests --test ui`
//! and review the `.stderr` diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/fail/**/*.rs");
    t.pass("ui/pass/*.rs");
}
