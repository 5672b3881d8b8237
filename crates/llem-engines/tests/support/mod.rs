//! Test support shared by the integration tests of this crate.
pub mod prompts;

pub use llem_testkit::machine::{exclusive, shared};
