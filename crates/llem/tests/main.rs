//! llem's integration tests: one binary (linked once), one module per subject.

mod cli;
mod common;
mod conversations;
mod device;
mod diffusion;
mod doctor;
mod live;
mod measure;
mod node;
mod records;
mod run;
mod serve;
mod slurm;
mod study;
mod trace;
mod transformers;
mod vllm;
