//! llem-config's integration tests: one binary (linked once), one module per subject.

mod common;
mod dialect004;
mod docs;
mod engines_in_sweeps;
mod errors;
mod fuzz_config;
mod hashing;
mod llem07_files;
mod precedence;
mod properties;
mod seed_examples;
