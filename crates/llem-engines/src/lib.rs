//! llem's engines and workloads.
//!
//! [`engine::Engine`] is the seam: an engine loads a model, runs a [`workload::Workload`]
//! and reports every request through a [`engine::RequestSink`] as its tokens arrive.
//! [`registry`] maps an engine name to its implementation and loads it: the embedded
//! llama.cpp engine ([`llamacpp::LlamaCppEngine`]) decodes all sequences of a batch in one
//! llama.cpp batch per step; [`transformers::TransformersEngine`] drives Hugging Face
//! transformers in a Python worker process; [`serving::ServerEngine`] drives a server, whose
//! launch and metrics each engine file under [`serving::engines`] describes. The generic
//! layer ([`engine`], [`workload`], [`launch`]) imports no concrete engine. Nothing here
//! measures energy.

pub mod assets;
mod engine;
pub mod engine_log;
mod error;
mod launch;
pub mod llamacpp;
pub mod memory;
pub mod model_config;
pub mod placement;
pub mod registry;
pub mod sampling;
pub mod serving;
pub mod transformers;
pub mod workload;

pub use engine::{
    ContextPlan, Engine, EngineError, EngineInfo, EngineMemory, ModelInfo, RequestSink, RunSummary,
    Session, Step, StepKind,
};
pub use error::{ChunkError, LaunchError, ShareGptError, StreamError, TraceError, TrafficError};
pub use launch::which;
pub use workload::{Prompt, Workload};
