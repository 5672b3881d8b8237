//! llem-engines's integration tests: one binary (linked once), one module per subject.

mod serving;
mod smollm2;
mod support;
mod transformers;
