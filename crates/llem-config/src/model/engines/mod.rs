//! Engine sections: one file per engine.

pub mod llamacpp;
pub(crate) mod sglang;
pub(crate) mod tensorrt;
pub(crate) mod tgi;
pub(crate) mod transformers;
pub(crate) mod vllm;

pub use llamacpp::LlamaCppConfig;
pub use sglang::SglangConfig;
pub use tensorrt::TensorRtConfig;
pub use tgi::TgiConfig;
pub use transformers::TransformersConfig;
pub use vllm::VllmConfig;
