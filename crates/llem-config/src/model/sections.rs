//! The engine-independent sections of an experiment: dataset, decoder, warmup, baseline,
//! measurement, traffic, LoRA.
//!
//! Ranges are declared once, as `#[schemars(range(..))]` / `extend("exclusiveMinimum" ..)`
//! attributes: they appear in `llem config schema` and the validator reads them from there.

use std::num::NonZeroU32;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::names::{
    Arrival, BaselineStrategy, DatasetOrder, LengthDistribution, Methodology, PhaseSplit, Preset,
    TraceFormatName, TraceTimeUnit,
};

/// Which prompts to use and how they are loaded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DatasetConfig {
    /// Built-in alias (`aienergyscore`, `sharegpt`, `synthetic`) or a `.jsonl` file path.
    pub source: String,
    /// Number of prompts to load.
    #[schemars(range(min = 1, max = 1_000_000))]
    pub n_prompts: u32,
    /// Prompt ordering: interleaved (round-robin by source), grouped, shuffled (seeded).
    pub order: DatasetOrder,
    /// Lengths of the generated prompts and replies (source `synthetic` only).
    pub synthetic: Option<SyntheticConfig>,
}

/// Synthetic prompts: token-exact input lengths made of real vocabulary tokens, and a fixed
/// number of output tokens per request (end-of-sequence ignored), both fixed or drawn from a
/// seeded distribution (`random_seed`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SyntheticConfig {
    /// Prompt length in tokens (the mean when a distribution is used).
    #[schemars(range(min = 1))]
    pub input_tokens: u32,
    /// Reply length in tokens (the mean when a distribution is used).
    #[schemars(range(min = 1))]
    pub output_tokens: u32,
    /// fixed, uniform (mean +/- spread x mean), normal (CV = spread), lognormal (CV = spread).
    pub distribution: LengthDistribution,
    /// Relative spread of the lengths (ignored when fixed).
    #[schemars(range(min = 0.0, max = 2.0))]
    pub spread: f64,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        SyntheticConfig {
            input_tokens: 128,
            output_tokens: 128,
            distribution: LengthDistribution::Fixed,
            spread: 0.25,
        }
    }
}

impl Default for DatasetConfig {
    fn default() -> Self {
        DatasetConfig {
            source: "aienergyscore".into(),
            n_prompts: 100,
            order: DatasetOrder::Interleaved,
            synthetic: None,
        }
    }
}

/// Universal decoding parameters, honoured by every engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DecoderConfig {
    /// Sampling temperature (0 = greedy).
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: f64,
    /// Enable sampling (greedy when false or when temperature is 0).
    pub do_sample: bool,
    /// Top-k sampling (0 = disabled).
    pub top_k: u32,
    /// Top-p nucleus sampling (1.0 = disabled).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub top_p: f64,
    /// Repetition penalty (1.0 = none).
    #[schemars(range(min = 0.1, max = 10.0))]
    pub repetition_penalty: f64,
    /// Minimum token probability relative to the most likely token (null = disabled).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_p: Option<f64>,
    /// Minimum number of generated tokens before EOS may end a sequence (null = none).
    #[schemars(range(min = 1))]
    pub min_new_tokens: Option<u32>,
    /// Preset expanded into the fields above; explicitly written fields win over it.
    pub preset: Option<Preset>,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            temperature: 1.0,
            do_sample: true,
            top_k: 50,
            top_p: 1.0,
            repetition_penalty: 1.0,
            min_p: None,
            min_new_tokens: None,
            preset: None,
        }
    }
}

impl DecoderConfig {
    /// True when decoding is greedy (no sampling or temperature 0).
    pub fn is_greedy(&self) -> bool {
        !self.do_sample || self.temperature == 0.0
    }
}

impl Preset {
    /// The concrete values a preset stands for, as `(decoder key, YAML value)` pairs.
    pub fn values(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Preset::Deterministic => &[("temperature", "0.0"), ("do_sample", "false")],
            Preset::Standard => &[
                ("temperature", "1.0"),
                ("do_sample", "true"),
                ("top_p", "0.95"),
            ],
            Preset::Creative => &[
                ("temperature", "0.8"),
                ("do_sample", "true"),
                ("top_p", "0.9"),
                ("repetition_penalty", "1.1"),
            ],
            Preset::Factual => &[("temperature", "0.3"), ("do_sample", "true")],
        }
    }
}

/// Warmup before the measurement window: a fixed number of prompts, or until latency
/// converges (coefficient of variation below a threshold); then a thermal floor wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WarmupConfig {
    /// Run a warmup phase.
    pub enabled: bool,
    /// Warmup prompts in fixed mode (ignored when convergence_detection is on).
    #[schemars(range(min = 1))]
    pub n_warmup: u32,
    /// Wait after warmup so temperatures plateau, in seconds. The methodology recommends at
    /// least 30 s; shorter waits are allowed (for demos and CPU runs) and flagged. At most an
    /// hour.
    #[schemars(range(min = 0.0, max = 3600.0))]
    pub thermal_floor_seconds: f64,
    /// Adaptive warmup: run until the latency CV drops below cv_threshold.
    pub convergence_detection: bool,
    /// CV target for convergence.
    #[schemars(range(min = 0.01, max = 0.5))]
    pub cv_threshold: f64,
    /// Safety cap on warmup prompts in CV mode.
    #[schemars(range(min = 5))]
    pub max_prompts: u32,
    /// Sliding window size for the CV.
    #[schemars(range(min = 3))]
    pub window_size: u32,
    /// Prompts before convergence is first checked.
    #[schemars(range(min = 1))]
    pub min_prompts: u32,
    /// Keep warming until the device is steady: power, temperature and throttling over a
    /// trailing window (null = no gate).
    pub gate: Option<WarmupGate>,
}

/// The composite warmup gate: after the warmup prompts, more warmup rounds run until, over
/// the trailing `window_seconds`, the sampled power's CoV is at most `max_power_cov`, the
/// hottest temperature moved at most `max_temperature_range_c` and (with `no_throttle`) no
/// clock was throttled — or `timeout_seconds` pass, which the result says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WarmupGate {
    /// Trailing window judged, s.
    #[schemars(range(min = 1.0, max = 3600.0))]
    pub window_seconds: f64,
    /// Largest coefficient of variation of the total sampled power in the window.
    #[schemars(extend("exclusiveMinimum" = 0), range(max = 1.0))]
    pub max_power_cov: f64,
    /// Largest spread of the hottest temperature in the window, °C (sensors without a
    /// temperature skip this test, and the result says so).
    #[schemars(range(min = 0.0, max = 100.0))]
    pub max_temperature_range_c: f64,
    /// No thermal, power-cap or hardware throttling in the window.
    pub no_throttle: bool,
    /// Give up after this long, s: the run goes on, flagged.
    #[schemars(range(min = 1.0, max = 86400.0))]
    pub timeout_seconds: f64,
}

impl Default for WarmupGate {
    fn default() -> Self {
        WarmupGate {
            window_seconds: 30.0,
            max_power_cov: 0.05,
            max_temperature_range_c: 2.0,
            no_throttle: true,
            timeout_seconds: 600.0,
        }
    }
}

impl Default for WarmupConfig {
    fn default() -> Self {
        WarmupConfig {
            enabled: true,
            n_warmup: 5,
            thermal_floor_seconds: 60.0,
            convergence_detection: false,
            cv_threshold: 0.05,
            max_prompts: 20,
            window_size: 3,
            min_prompts: 5,
            gate: None,
        }
    }
}

/// Idle (baseline) power measurement, subtracted for adjusted energy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BaselineConfig {
    /// Measure baseline power.
    pub enabled: bool,
    /// Baseline measurement duration in seconds.
    #[schemars(range(min = 5.0, max = 120.0))]
    pub duration_seconds: f64,
    /// validated (cached + periodic spot check), cached (disk cache with TTL), fresh (every
    /// experiment).
    pub strategy: BaselineStrategy,
    /// How long a cached baseline stays valid, in seconds.
    #[schemars(range(min = 60.0))]
    pub cache_ttl_seconds: f64,
    /// Spot-check the cached baseline every N experiments (validated strategy).
    #[schemars(range(min = 1))]
    pub validation_interval: u32,
    /// Relative power drift that triggers re-measurement (validated strategy).
    #[schemars(range(min = 0.01, max = 0.5))]
    pub drift_threshold: f64,
}

impl Default for BaselineConfig {
    fn default() -> Self {
        BaselineConfig {
            enabled: true,
            duration_seconds: 30.0,
            strategy: BaselineStrategy::Validated,
            cache_ttl_seconds: 7200.0,
            validation_interval: 5,
            drift_threshold: 0.10,
        }
    }
}

/// How the measurement window is chosen and what latency detail is captured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MeasurementConfig {
    /// total (whole run), steady_state (all slots busy), windowed (explicit window),
    /// windows (consecutive windows after a ramp, each measured; served engines).
    pub methodology: Methodology,
    /// Per-token timing where an engine must pay for it; flagged in the result, part of
    /// the config hash.
    pub latency_profiling: bool,
    /// `[start_s, end_s]` relative to the start of the workload; methodology windowed only.
    pub window: Option<[f64; 2]>,
    /// Share of failed requests a cell may have and still count as measured (null = 0:
    /// any failed request fails the cell).
    #[schemars(range(min = 0, max = 1))]
    pub max_failed_request_fraction: Option<f64>,
    /// Methodology `windows`: consecutive windows after a ramp (null = the defaults).
    pub windows: Option<WindowsConfig>,
    /// How the energy is split into prefill and decode: attributed (null: from the engine's
    /// passes or the requests in flight), difference (the prompts run again with one output
    /// token after the window; methodology total), both.
    pub phase_split: Option<PhaseSplit>,
    /// Width of the time bins the window's energy is cut into (`timeline.parquet`), s
    /// (null = 10).
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub timeline_bin_seconds: Option<f64>,
}

impl Default for MeasurementConfig {
    fn default() -> Self {
        MeasurementConfig {
            methodology: Methodology::Total,
            latency_profiling: false,
            window: None,
            max_failed_request_fraction: None,
            windows: None,
            phase_split: None,
            timeline_bin_seconds: None,
        }
    }
}

impl MeasurementConfig {
    /// The windows of methodology `windows`, defaults filled.
    pub fn windows_or_default(&self) -> WindowsConfig {
        self.windows.clone().unwrap_or_default()
    }
}

/// Methodology `windows` (the server mode of llem 0.7): a served cell sends its traffic for
/// `ramp_exclusion_seconds` plus `n_windows` x `window_seconds`; the ramp is discarded, each
/// window is measured on its own, and the cell is valid only when the windows' energy per
/// token agrees within `cov_threshold`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WindowsConfig {
    /// Consecutive measured windows.
    #[schemars(range(min = 2, max = 1000))]
    pub n_windows: u32,
    /// Length of each window, s.
    #[schemars(range(min = 1.0, max = 86400.0))]
    pub window_seconds: f64,
    /// Traffic discarded before the first window while the server fills, s.
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub ramp_exclusion_seconds: f64,
    /// Largest coefficient of variation of the windows' energy per token for a valid cell.
    #[schemars(extend("exclusiveMinimum" = 0), range(max = 1.0))]
    pub cov_threshold: f64,
}

impl Default for WindowsConfig {
    fn default() -> Self {
        WindowsConfig {
            n_windows: 3,
            window_seconds: 240.0,
            ramp_exclusion_seconds: 30.0,
            cov_threshold: 0.05,
        }
    }
}

impl WindowsConfig {
    /// Seconds of traffic the windows need: the ramp and every window.
    pub fn span_s(&self) -> f64 {
        self.ramp_exclusion_seconds + f64::from(self.n_windows) * self.window_seconds
    }
}

/// Request traffic for serving engines (vLLM, SGLang, TensorRT-LLM, TGI, llama-server,
/// any OpenAI-compatible URL).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TrafficConfig {
    /// all_at_once, constant, poisson, gamma.
    pub arrival: Arrival,
    /// Mean request rate in requests per second (constant, poisson, gamma).
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub rate_qps: Option<f64>,
    /// Coefficient of variation of inter-arrival times (gamma; 1 = Poisson).
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub burstiness: Option<f64>,
    /// Closed-loop cap on requests in flight.
    pub max_concurrency: Option<NonZeroU32>,
    /// Stop sending new requests after this many seconds.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub duration_seconds: Option<f64>,
    /// Send this many requests (prompts are reused in order when it exceeds the dataset).
    #[schemars(range(min = 1, max = 1_000_000))]
    pub n_requests: Option<u32>,
    /// Seed of the arrival process (null = `random_seed`).
    pub seed: Option<i64>,
    /// Latency objectives for goodput.
    pub slo: Option<SloConfig>,
    /// Replay a production trace: its arrivals, input and output lengths and shared prefixes
    /// replace the arrival process and the dataset's prompts (the dataset's text is cut to the
    /// trace's lengths).
    pub trace: Option<TraceConfig>,
    /// Multi-turn conversations: sessions of turns, each turn's prompt the conversation so
    /// far with the server's replies threaded in (replaces the arrival process).
    pub conversations: Option<ConversationsConfig>,
}

impl TrafficConfig {
    /// The longest arrival schedule llem plans and sends, s (30 days): past it a rate or a
    /// duration is a typo, and its send times no longer fit a clock.
    pub const MAX_SCHEDULE_S: f64 = 30.0 * 86_400.0;
    /// The burstiest gamma arrivals llem draws (coefficient of variation of the gaps): past
    /// it the process degenerates into a few gaps of astronomical length.
    pub const MAX_BURSTINESS: f64 = 100.0;
    /// The most requests one cell sends (`n_requests`, or a rate times a duration): each
    /// is a record held in memory and a row of `requests.parquet`.
    pub const MAX_REQUESTS: u32 = 1_000_000;
}

impl Default for TrafficConfig {
    fn default() -> Self {
        TrafficConfig {
            arrival: Arrival::AllAtOnce,
            rate_qps: None,
            burstiness: None,
            max_concurrency: None,
            duration_seconds: None,
            n_requests: None,
            seed: None,
            slo: None,
            trace: None,
            conversations: None,
        }
    }
}

/// Multi-turn conversations as a served run's traffic: `sessions` conversations of up to
/// `turns` user messages each; a turn is sent `think_time_seconds` after the reply to the one
/// before it ended, its prompt the conversation so far (the server's own replies threaded in)
/// and the new message. Messages are the dataset's: each ShareGPT conversation's human turns in
/// order, or, for `source: synthetic`, one synthetic message per turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ConversationsConfig {
    /// Conversations sent.
    #[schemars(range(min = 1, max = 100_000))]
    pub sessions: u32,
    /// User turns per conversation, at most (a ShareGPT conversation may have fewer).
    #[schemars(range(min = 1, max = 1000))]
    pub turns: u32,
    /// Pause between a reply's end and the conversation's next message, s.
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub think_time_seconds: f64,
    /// Gap between the starts of consecutive conversations, s (0: all start at once).
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub session_interval_seconds: f64,
}

impl Default for ConversationsConfig {
    fn default() -> Self {
        ConversationsConfig {
            sessions: 8,
            turns: 4,
            think_time_seconds: 1.0,
            session_interval_seconds: 0.0,
        }
    }
}

/// A production trace replayed as a served run's traffic: each record is a request sent at
/// the record's time (from the slice's start, gaps times `time_scale`), with a prompt of the
/// record's input length cut from the dataset's text with the server's tokenizer, asking for
/// exactly the record's output length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceConfig {
    /// The trace file (CSV or JSON Lines), relative to the working directory.
    pub path: String,
    /// azure, burstgpt, mooncake, or csv / jsonl with `columns:`.
    pub format: TraceFormatName,
    /// Where a csv or jsonl trace keeps each figure (not for the named formats).
    #[serde(default)]
    pub columns: Option<TraceColumns>,
    /// Skip this much of the trace, s from its first record.
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub start_seconds: f64,
    /// Replay this much of it, s of trace time (null: to its end).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub duration_seconds: Option<f64>,
    /// Multiplies the gaps between arrivals (0.5 replays twice as fast).
    #[serde(default = "one")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub time_scale: f64,
    /// Keep only this model's requests (a trace with a model column, e.g. BurstGPT's
    /// `ChatGPT` or `GPT-4`).
    #[serde(default)]
    pub model: Option<String>,
    /// Stop after this many requests of the slice.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_requests: Option<u32>,
}

fn one() -> f64 {
    1.0
}

/// The columns (CSV) or keys (JSONL) of a trace in no published format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceColumns {
    /// The arrival time.
    pub timestamp: String,
    /// Its unit: s, ms, us or datetime.
    #[serde(default = "seconds")]
    pub time_unit: TraceTimeUnit,
    /// Prompt tokens.
    pub input_tokens: String,
    /// Tokens generated.
    pub output_tokens: String,
    /// The prompt's 512-token prefix blocks: a list of ids (JSONL) or ids separated by spaces
    /// or `;` (CSV).
    #[serde(default)]
    pub hash_ids: Option<String>,
    /// The model that served the request (for `model:` to keep one).
    #[serde(default)]
    pub model: Option<String>,
}

fn seconds() -> TraceTimeUnit {
    TraceTimeUnit::Seconds
}

/// Latency objectives; a request meets the SLO when every bound that is set holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SloConfig {
    /// Time to first token bound, in milliseconds.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub ttft_ms: Option<f64>,
    /// Time per output token bound, in milliseconds.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub tpot_ms: Option<f64>,
    /// End-to-end latency bound, in milliseconds.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub e2e_ms: Option<f64>,
}

/// A LoRA adapter applied to the model: exactly one of adapter_id / adapter_path. Engines
/// that cannot apply it refuse the configuration at plan time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LoraConfig {
    /// Hugging Face Hub adapter id (transformers).
    pub adapter_id: Option<String>,
    /// Local adapter: a GGUF adapter file for llamacpp, a PEFT adapter directory for
    /// transformers and vllm; relative to the working directory.
    pub adapter_path: Option<String>,
    /// Merge the adapter into the base weights at load time (transformers).
    pub merge_weights: bool,
    /// Strength of the adapter: 0 is the base model, 1 the adapter as trained (llamacpp,
    /// transformers; vllm applies 1 only).
    #[schemars(range(min = 0.0))]
    pub scale: f64,
}

impl LoraConfig {
    /// `adapter_path` made absolute, for a server or worker whose working directory is not
    /// llem's.
    pub fn absolute_adapter_path(&self) -> Option<String> {
        let p = self.adapter_path.as_deref()?;
        Some(
            std::path::absolute(p)
                .unwrap_or_else(|_| std::path::PathBuf::from(p))
                .display()
                .to_string(),
        )
    }
}

impl Default for LoraConfig {
    fn default() -> Self {
        LoraConfig {
            adapter_id: None,
            adapter_path: None,
            merge_weights: false,
            scale: 1.0,
        }
    }
}
