//! llem-study's integration tests: one binary (linked once), one module per subject.

mod supervise;
