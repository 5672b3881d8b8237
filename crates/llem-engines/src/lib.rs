//! llem's engines and workloads.
//!
//! [`engine::Engine`] is the seam: an engine loads a model, runs a [`workload::Workload`]
//! and reports every request through a [`engine::RequestSink`] as its tokens arrive. The
//! embedded llama.cpp engine ([`llamacpp::LlamaCppEngine`]) decodes all sequences of a batch
//! in one llama.cpp batch per step. The workload side owns datasets, batching strategies and
//! decoding parameters. Nothing here measures energy.

pub mod assets;
pub mod engine;
pub mod llamacpp;
pub mod sampling;
pub mod workload;

pub use engine::{Engine, EngineError, EngineInfo, ModelInfo, RequestSink, RunSummary};
pub use workload::{Prompt, Workload};
