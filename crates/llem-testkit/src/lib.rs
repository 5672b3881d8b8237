//! Test support shared across crates (dev-dependency only). Each module was once included by
//! `#[path]` into several test binaries; here it is compiled once. A helper that cannot do its
//! job panics, as the test calling it would.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub mod fake_openai;
pub mod lora;
pub mod machine;
pub mod mlenergy_tree;
pub mod mutate;
pub mod node_power;
pub mod nvml_standin;
