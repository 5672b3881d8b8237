//! llem-energy's integration tests: one binary (linked once), one module per subject.

mod node_power;
mod nvml_standin;
mod rapl_tree;
mod settings;
