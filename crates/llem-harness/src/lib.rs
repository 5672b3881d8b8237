//! llem harness.
