//! Engine sections: one file per engine.

pub mod llamacpp;
pub mod sglang;
pub mod tensorrt;
pub mod tgi;
pub mod transformers;
pub mod vllm;

pub use llamacpp::LlamaCppConfig;
pub use sglang::SglangConfig;
pub use tensorrt::TensorRtConfig;
pub use tgi::TgiConfig;
pub use transformers::TransformersConfig;
pub use vllm::VllmConfig;
