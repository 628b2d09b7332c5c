//! Compile-time guarantees, pinned with trybuild: misuse that must not compile
//! (with the message it gives) and tricky inputs that must compile.
//!
//! Regenerate snapshots with `TRYBUILD=overwrite cargo test -p nodes-ui-tests`
//! and review the `.stderr` diff.

#[cfg(test)]
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("fail/**/*.rs");
    t.pass("pass/*.rs");
}
