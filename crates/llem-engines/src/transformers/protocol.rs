//! The worker's JSON-lines protocol: ops llem writes to its stdin, events it writes back.
//! Every event carries `t`, the worker's `time.monotonic()` (CLOCK_MONOTONIC, the clock
//! Rust's `Instant` reads on Linux), so token times map onto llem's clock exactly.

use serde::{Deserialize, Serialize};

/// The protocol version this build speaks; the worker says its own in `hello`.
pub const PROTOCOL: u32 = 1;

/// One prompt as the worker tokenizes it.
#[derive(Clone, Debug, Serialize)]
pub struct PromptOp {
    /// Text (absent for synthetic prompts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Wrap the text as a user turn in the chat template.
    pub chat: bool,
    /// Synthetic prompt: this many vocabulary tokens drawn with `seed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u32>,
    /// Seed of the synthetic draw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Reference reply, whose token count the worker returns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// One request of a generate batch.
#[derive(Clone, Debug, Serialize)]
pub struct RequestOp {
    /// Index into the prepared prompts.
    pub index: u32,
    /// Output limit of this request.
    pub max_new_tokens: u32,
    /// Generate exactly `max_new_tokens`, end-of-sequence masked.
    pub ignore_eos: bool,
}

/// What llem asks of the worker.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Load the model and tokenizer (one per worker).
    Load {
        /// Hub id or local directory.
        model: String,
        /// GGUF file inside `model`.
        gguf_file: Option<String>,
        /// torch dtype name.
        dtype: Option<String>,
        /// The `transformers:` section as configured.
        transformers: serde_json::Value,
        /// Decoding ([`crate::sampling::SamplingParams`]).
        sampling: serde_json::Value,
        /// `passthrough_kwargs` as configured.
        passthrough_kwargs: serde_json::Value,
        /// The `lora:` section, its adapter path made absolute; null without one.
        lora: serde_json::Value,
    },
    /// Tokenize a workload's prompts (replacing the previous ones).
    Prepare {
        /// The prompts, in workload order.
        prompts: Vec<PromptOp>,
        /// Prompts are cut to this many tokens.
        max_input_tokens: Option<u32>,
    },
    /// Synchronise the device and reset its peak-memory counter.
    Mark,
    /// One batch through `generate()`.
    Generate {
        /// Batch number, echoed back.
        batch: u32,
        /// The batch's requests.
        requests: Vec<RequestOp>,
        /// Stream token times (one request per batch).
        stream: bool,
        /// torch seed for this batch.
        seed: u64,
        /// Return the generated token ids (tests).
        return_ids: bool,
    },
    /// Exit.
    Shutdown,
}

/// What the worker reports.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// First line, before any heavy import.
    Hello {
        /// The worker's protocol version.
        protocol: u32,
        /// Python version.
        python: String,
        /// The interpreter's path.
        #[serde(default)]
        executable: Option<String>,
    },
    /// torch and transformers imported.
    Ready {
        /// torch version.
        torch: String,
        /// transformers version.
        transformers: String,
        /// CUDA version torch was built with.
        #[serde(default)]
        cuda: Option<String>,
        /// Visible CUDA devices.
        #[serde(default)]
        devices: Vec<String>,
    },
    /// The model is loaded and a two-token probe generated.
    Loaded(Box<Loaded>),
    /// Prompts tokenized.
    Prepared {
        /// Prompt lengths, tokens.
        input_tokens: Vec<u32>,
        /// Which prompts were cut to `max_input_tokens`.
        truncated: Vec<bool>,
        /// Token counts of the reference replies.
        reference_tokens: Vec<Option<u32>>,
    },
    /// Peak memory counter reset.
    Marked,
    /// One streamed token of `request`.
    Token {
        /// Request index.
        request: u32,
        /// Monotonic time, s.
        t: f64,
    },
    /// A non-streamed batch is still decoding.
    Progress {
        /// Decode steps so far.
        steps: u32,
    },
    /// A request finished.
    RequestDone {
        /// Request index.
        request: u32,
        /// Output tokens (end-of-sequence excluded).
        output_tokens: u32,
        /// `stop` or `length`.
        finish_reason: String,
        /// Generated ids, when asked.
        #[serde(default)]
        token_ids: Option<Vec<i64>>,
        /// When it finished, monotonic s.
        end_t: f64,
    },
    /// A batch finished.
    BatchDone {
        /// Monotonic time generate() started (after a device sync), s.
        t0: f64,
        /// Monotonic time it returned (after a device sync), s.
        t1: f64,
        /// Decode steps.
        #[serde(default)]
        steps: u32,
        /// When each forward pass ended, monotonic s (the first ends the prefill); empty
        /// from a worker that does not say.
        #[serde(default)]
        step_ends: Vec<f64>,
        /// `torch.cuda.max_memory_allocated()` since the last mark, bytes.
        #[serde(default)]
        device_peak_bytes: Option<u64>,
        /// The worker's peak resident memory, bytes.
        #[serde(default)]
        rss_peak_bytes: Option<u64>,
    },
    /// An op failed.
    Error(WorkerFailure),
    /// An event this build does not know (a newer worker); ignored.
    #[serde(other)]
    Unknown,
}

/// The model as the worker loaded it: the result's model description (its config's names
/// mapped by the worker) plus where it runs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Loaded {
    /// Architecture, sizes, dtype, parameters, weights and file size.
    #[serde(flatten)]
    pub model: llem_results::result::ModelDescription,
    /// torch device of the weights.
    pub device: String,
    /// Device name.
    pub device_name: Option<String>,
    /// GPU memory, bytes.
    pub device_total_bytes: Option<u64>,
    /// CUDA indices of the GPUs holding weights (empty on the CPU).
    pub gpus: Vec<u32>,
    /// The tokenizer has a chat template.
    pub chat_template: bool,
}

/// What the worker reports when an op fails.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct WorkerFailure {
    /// `missing_package`, `rejected`, `oom` or `exception`.
    pub kind: String,
    /// What went wrong.
    pub message: String,
    /// The missing package.
    #[serde(default)]
    pub package: Option<String>,
    /// The config field the installed libraries rejected.
    #[serde(default)]
    pub field: Option<String>,
    /// Python traceback.
    #[serde(default)]
    pub traceback: Option<String>,
}
