//! llem's engines and workloads.
//!
//! [`engine::Engine`] is the seam: an engine loads a model, runs a [`workload::Workload`]
//! and reports every request through a [`engine::RequestSink`] as its tokens arrive. The
//! embedded llama.cpp engine ([`llamacpp::LlamaCppEngine`]) decodes all sequences of a batch
//! in one llama.cpp batch per step; [`transformers::TransformersEngine`] drives Hugging Face
//! transformers in a Python worker process. The workload side owns datasets, batching strategies and
//! decoding parameters. Nothing here measures energy.

pub mod assets;
pub mod engine;
pub mod llamacpp;
pub mod sampling;
pub mod serving;
pub mod transformers;
pub mod workload;

/// Loads the engine `cfg` asks for, with the model at `model_path`.
pub fn load(
    cfg: &llem_config::ExperimentConfig,
    model_path: &std::path::Path,
) -> Result<Box<dyn Engine>, EngineError> {
    match cfg.engine {
        llem_config::Engine::LlamaCpp => {
            let settings = cfg.llamacpp.as_deref().cloned().unwrap_or_default();
            Ok(Box::new(llamacpp::LlamaCppEngine::load(
                model_path, &settings,
            )?))
        }
        other => Err(EngineError::Config(format!(
            "engine `{other}` is not available in this build"
        ))),
    }
}

/// The session plan for `cfg` on a model trained with `n_ctx_train` positions.
pub fn plan_for(cfg: &llem_config::ExperimentConfig, n_ctx_train: u32) -> ContextPlan {
    let plan = llamacpp::plan_for_config(cfg, n_ctx_train);
    if cfg.engine == llem_config::Engine::Transformers {
        // The worker pads each batch to its longest prompt; "slots" are the batch's rows.
        return ContextPlan {
            slots: transformers::batch_plan(cfg).1,
            ..plan
        };
    }
    plan
}

pub use engine::{
    ContextPlan, Engine, EngineError, EngineInfo, EngineMemory, ModelInfo, RequestSink, RunSummary,
    Session,
};
pub use workload::{Prompt, Workload};
