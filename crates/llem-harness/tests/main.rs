//! llem-harness's integration tests: one binary (linked once), one module per subject.

mod attribution_rapl;
