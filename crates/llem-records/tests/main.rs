//! llem-records's integration tests: one binary (linked once), one module per subject.

mod fuzz_results;
mod llem07_bundles;
mod mlenergy_parity;
mod power_trace;
mod query;
mod swept_fields;
