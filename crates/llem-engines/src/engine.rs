//! The engine seam: load a model, run a workload reporting every request as its tokens
//! arrive, unload.

use llem_results::RequestRecord;

use crate::workload::{BatchingSpec, Workload};

/// What an engine is.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineInfo {
    /// Engine name as in the config (`llamacpp`).
    pub name: &'static str,
    /// Version of the engine library (llama.cpp build number for the embedded engine).
    pub version: Option<String>,
    /// Backend details (SIMD features, GPU offload).
    pub system_info: Option<String>,
    /// Where the loaded engine computes, when it knows better than its configuration
    /// ([`crate::placement::planned`] otherwise).
    pub placement: Option<crate::placement::Placement>,
}

/// The model as the engine loaded it; what FLOPs and the result need. The same record is
/// written to `result.json` (`environment.model`), so it is the result schema's type.
pub type ModelInfo = llem_results::result::ModelDescription;

/// Receives requests as the engine serves them. Times are seconds on the harness's clock
/// (the engine asks the sink for the time so every timestamp shares one epoch).
pub trait RequestSink {
    /// Seconds since the experiment start.
    fn now_s(&self) -> f64;
    /// `n` new output tokens of `request_id` arrived at `t_s` (one call per decode step).
    fn on_tokens(&mut self, request_id: u32, t_s: f64, n: u32);
    /// A request finished.
    fn on_done(&mut self, record: RequestRecord);
    /// The engine ran one forward pass (engines that know their steps report every one,
    /// so the harness can attribute energy to prefill, decode and requests).
    fn on_step(&mut self, step: Step) {
        let _ = step;
    }
    /// True when the run should stop (Ctrl-C); engines check it between decode steps.
    fn cancelled(&self) -> bool {
        false
    }
}

/// What a forward pass computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Prompt tokens (and, with them, each finishing prompt's first output token).
    Prefill,
    /// One output token for each sequence in the step.
    Decode,
}

/// One forward pass of an engine, on the harness's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Prefill or decode.
    pub kind: StepKind,
    /// When the pass started, s.
    pub start_s: f64,
    /// When it ended (its tokens sampled), s.
    pub end_s: f64,
    /// The requests in it and the tokens each had in it (prompt tokens for prefill, one for
    /// decode): their share of the step's energy.
    pub tokens: Vec<(u32, u32)>,
}

/// What a workload run produced besides the per-request records.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSummary {
    /// Batches decoded.
    pub num_batches: u32,
    /// Mean sequences per batch.
    pub effective_batch_size: f64,
    /// Idle decode slots / all decode slots (finished sequences waiting for their batch).
    pub padding_overhead: f64,
    /// Prompt tokens cut by `max_input_tokens`.
    pub truncated_prompts: u32,
    /// KV cache size, bytes.
    pub kv_cache_bytes: Option<u64>,
    /// Anything the harness should surface as a measurement warning.
    pub warnings: Vec<String>,
    /// How token times were obtained (`true_streaming`, `proportional`); null when every
    /// token was timed where it was produced (embedded engines).
    pub latency_mode: Option<&'static str>,
    /// The server's Prometheus samples (serving engines).
    pub server_metrics: Vec<llem_results::MetricSample>,
    /// The traffic sent (serving engines).
    pub traffic: Option<llem_results::result::TrafficSummary>,
    /// Memory as the engine process saw it (a worker process; null when the engine runs in
    /// llem's own process or on a server).
    pub memory: Option<EngineMemory>,
    /// How the server's prefix cache was emptied before this run (`POST /reset_prefix_cache`);
    /// null when it was not.
    pub prefix_cache_reset: Option<String>,
}

/// Peak memory reported by an engine that runs outside llem's process.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineMemory {
    /// Peak during the run, MiB.
    pub peak_mib: f64,
    /// Device memory, MiB (GPU), when known.
    pub total_mib: Option<f64>,
    /// Where the figure comes from (`torch_cuda_max_memory_allocated`, `worker_rss`).
    pub source: &'static str,
}

/// An engine failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The model could not be found or loaded.
    #[error("cannot load model {model}: {reason}")]
    Load {
        /// The model.
        model: String,
        /// Why.
        reason: String,
    },
    /// The engine's settings cannot work (context too small, bad combination).
    #[error("{0}")]
    Config(String),
    /// Inference failed.
    #[error("inference failed: {0}")]
    Inference(String),
    /// The run was cancelled (Ctrl-C).
    #[error("cancelled")]
    Cancelled,
}

/// How a session groups prompts and sizes its context. The batch is decided here, once,
/// before the context is allocated: the session decodes every workload it runs in batches of
/// this spec, so no workload can ask for more sequences than the context holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContextPlan {
    /// How prompts are grouped; its batch size is the number of sequences decoded together
    /// (KV streams, "slots").
    pub batching: BatchingSpec,
    /// Tokens per slot (prompt + output).
    pub tokens_per_slot: u32,
    /// CPU threads.
    pub n_threads: i32,
}

/// A loaded model: the engine side of the seam. Unloading is dropping it.
pub trait Engine {
    /// Name, version, backend.
    fn info(&self) -> EngineInfo;
    /// The loaded model.
    fn model_info(&self) -> &ModelInfo;
    /// What the result must say about the load (e.g. an architecture llem could not learn).
    fn load_notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Training context length, for sizing a session.
    fn n_ctx_train(&self) -> u32;
    /// True when prompts get the model's chat template.
    fn has_chat_template(&self) -> bool;
    /// Opens a session (context, KV cache) for `plan`; warmup and measurement share it, so
    /// its allocation happens before the window.
    fn open(&self, plan: ContextPlan) -> Result<Box<dyn Session + '_>, EngineError>;
    /// The model's token ids for `text` (no special tokens), as the engine itself counts
    /// them: prompts cut from these have exact lengths.
    fn tokenize(&self, _text: &str) -> Result<Vec<u32>, EngineError> {
        Err(EngineError::Config(format!(
            "the {} engine cannot tokenize text for llem",
            self.info().name
        )))
    }
}

/// A ready context that serves workloads.
pub trait Session {
    /// Runs `workload`, reporting every request to `sink` as its tokens arrive.
    fn run(
        &mut self,
        workload: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<RunSummary, EngineError>;
    /// KV cache size, bytes.
    fn kv_cache_bytes(&self) -> Option<u64>;
    /// How it batches prompts: the plan it was opened with (a server batches by itself; its
    /// batch is then what a warmup round sends at once).
    fn batching(&self) -> BatchingSpec;
}
