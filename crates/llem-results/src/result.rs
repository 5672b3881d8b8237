//! `result.json`: one experiment's scientific record, schema 4.0 (seeds 000/001).
//!
//! Field names and units follow the Python llem's `ExperimentResult`, so notebooks written
//! against it read these files unchanged; fields llem adds (input/output token split,
//! environment, energy source, FLOPs method) are new keys, never renamed old ones.

use serde::{Deserialize, Serialize};

/// The schema version written by this llem.
pub const SCHEMA_VERSION: &str = "4.0";

/// One experiment's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentResult {
    /// `"4.0"`.
    pub schema_version: String,
    /// `{model}_{YYYYMMDD_HHMMSS}` for single experiments.
    pub experiment_id: String,
    /// SHA-256[:16] of the resolved config, environment fields excluded.
    pub measurement_config_hash: String,
    /// The llem version that produced this result (the field keeps the Python tool's name).
    pub llenergymeasure_version: Option<String>,
    /// Engine name (`llamacpp`, `transformers`, `vllm`, ...).
    pub engine: String,
    /// Engine library version.
    pub engine_version: Option<String>,
    /// Model name or path as configured.
    pub model_name: String,
    /// `total`, `steady_state` or `windowed`.
    pub measurement_methodology: String,
    /// `[start_s, end_s]` of the measured window relative to inference start.
    pub steady_state_window: Option<[f64; 2]>,
    /// `[start_s, end_s]` of the measurement window in seconds since the experiment start
    /// (the clock of `timeseries.parquet` and `requests.parquet`).
    pub measurement_window_s: Option<[f64; 2]>,

    /// Output tokens generated in the measurement window.
    pub total_tokens: u64,
    /// Prompt tokens processed in the measurement window.
    pub total_input_tokens: u64,
    /// Output tokens (same as `total_tokens`, named for symmetry).
    pub total_output_tokens: u64,
    /// Energy of the inference device over the window, J, no baseline subtraction (seeds
    /// 000/001): the GPUs the engine ran on, or the CPU packages and DRAM when it ran on
    /// the CPU (`energy_scope` says which). 0 with a warning and a null `energy_source` when
    /// no sensor of that scope could be read.
    pub total_energy_j: f64,
    /// `total_energy_j - baseline_power_w x total_inference_time_sec`, J, with the same
    /// scope's idle power.
    pub energy_adjusted_j: Option<f64>,
    /// Measurement window length, s.
    pub total_inference_time_sec: f64,
    /// Output tokens per second.
    pub avg_tokens_per_second: f64,
    /// (Input + output) tokens per second.
    pub avg_total_tokens_per_second: f64,
    /// J per output token.
    pub avg_energy_per_token_j: f64,
    /// mJ per output token from total energy.
    pub mj_per_tok_total: Option<f64>,
    /// mJ per output token from adjusted energy.
    pub mj_per_tok_adjusted: Option<f64>,
    /// Output tokens per joule (0 when no energy was measured).
    pub tokens_per_joule: f64,
    /// `counter`, `integrated` or `estimate`: the weakest source among the headline's
    /// domains.
    pub energy_source: Option<String>,
    /// What the headline energy holds: `gpu` (the engine's GPUs) or `cpu` (packages and
    /// DRAM); null in results written before llem had scopes.
    #[serde(default)]
    pub energy_scope: Option<String>,
    /// Energy of every measured domain over the window (GPUs, CPU packages, DRAM), J; never
    /// folded into the headline.
    #[serde(default)]
    pub system_energy_j: Option<f64>,
    /// `system_energy_j` per output token, mJ.
    #[serde(default)]
    pub system_mj_per_tok: Option<f64>,
    /// What `system_energy_j` is: `node` (the whole box, from a node power sensor: a BMC or
    /// power meter) or `components` (the sum of the measured GPUs, CPU packages and DRAM);
    /// null in results written before llem read node power.
    #[serde(default)]
    pub system_scope: Option<String>,
    /// The whole node's energy over the window, J (BMC or power meter); null without a node
    /// power sensor.
    #[serde(default)]
    pub node_energy_j: Option<f64>,
    /// `node_energy_j` less the measured components (GPUs, CPU packages, DRAM), J: fans,
    /// NICs, storage, the board, power-supply losses; its bound is
    /// `energy_breakdown.node.unattributed_bound_j`. Null without a node power sensor.
    #[serde(default)]
    pub unattributed_j: Option<f64>,
    /// CO2 of the headline and the system energy, with the factors used; null without
    /// energy.
    #[serde(default)]
    pub emissions: Option<Emissions>,

    /// Estimated FLOPs of the window; null when the model's architecture is unknown (a
    /// warning says why): seed 000 types it as a number, but 0 would read as a measurement.
    pub total_flops: Option<f64>,
    /// Decode FLOPs per decode (output) token.
    pub flops_per_output_token: Option<f64>,
    /// Prefill FLOPs per prefill (input) token.
    pub flops_per_input_token: Option<f64>,
    /// FLOPs per second of the window.
    pub flops_per_second: Option<f64>,
    /// How the FLOPs were estimated.
    pub flops: Option<FlopsEstimate>,

    /// Idle power, W.
    pub baseline_power_w: Option<f64>,
    /// Per-GPU energy, J (null without GPUs).
    pub energy_per_device_j: Option<Vec<f64>>,
    /// Raw, adjusted and per-domain energy, with the baseline's provenance.
    pub energy_breakdown: Option<EnergyBreakdown>,
    /// Multi-GPU aggregate (null for single-GPU runs).
    pub multi_gpu: Option<MultiGpuMetrics>,
    /// Raw per-process measurements: one per rank (GPU) of a multi-GPU run, one otherwise.
    pub process_results: Vec<ProcessResult>,
    /// How `process_results` were aggregated (null for single-GPU runs).
    pub aggregation: Option<AggregationMetadata>,

    /// What weakens this measurement.
    pub measurement_warnings: Vec<String>,
    /// Warmup prompts run before the window.
    pub warmup_excluded_samples: Option<u32>,
    /// The sampler, its accuracy and the methodology caveats.
    pub reproducibility_notes: String,
    /// Throttling seen during the window.
    pub thermal_throttle: Option<ThermalThrottleInfo>,
    /// How the warmup ended.
    pub warmup_result: Option<WarmupResult>,

    /// Start of the experiment (UTC, ISO-8601).
    pub start_time: String,
    /// End of the experiment (UTC, ISO-8601).
    pub end_time: String,
    /// `end_time - start_time`, s.
    pub duration_sec: f64,
    /// Relative path of the telemetry sidecar.
    pub timeseries: Option<String>,
    /// Relative path of the per-request sidecar.
    pub requests: Option<String>,
    /// TTFT/ITL/TPOT/E2E statistics.
    pub latency_stats: Option<LatencyStatistics>,
    /// Memory, utilisation, batch, KV-cache and request-latency metrics.
    pub extended_metrics: ExtendedEfficiencyMetrics,
    /// Machine, software and model the result came from.
    pub environment: Environment,
    /// How the steady-state (or explicit) window was chosen and whether it is trustworthy
    /// (serving engines; null for methodology total).
    #[serde(default)]
    pub steady_state: Option<SteadyStateInfo>,
    /// Methodology `windows`: each window's figures, their statistics and whether they
    /// agree (null for other methodologies).
    #[serde(default)]
    pub windows: Option<WindowsResult>,
    /// When each phase ran, s since the experiment start (the clock of `timeseries.parquet`):
    /// `load`, `warmup` (gate included), `thermal_floor`, `measure` (empty in results written
    /// before).
    #[serde(default)]
    pub phases: Vec<PhaseSpan>,
    /// Energy of the whole experiment on the headline's devices, every phase together
    /// (baseline when measured for this run, load, warmup, thermal floor, measurement,
    /// teardown), J: what a cold start costs beside what the window measured. Null when a
    /// phase's energy is unknown.
    #[serde(default)]
    pub lifecycle_energy_j: Option<f64>,
    /// The whole node's energy over every phase together, J; null without a node sensor or
    /// when a phase's node energy is unknown.
    #[serde(default)]
    pub lifecycle_node_energy_j: Option<f64>,
    /// The fully resolved configuration, as `effective_config.json` beside it holds it, so a
    /// result read alone still says what it measured (null in results written before).
    #[serde(default)]
    pub effective_config: Option<serde_json::Value>,
    /// Requests meeting the configured latency objectives (when `traffic.slo` is set).
    #[serde(default)]
    pub goodput: Option<Goodput>,
    /// The traffic that was sent (serving engines).
    #[serde(default)]
    pub traffic: Option<TrafficSummary>,
    /// Relative path of the Prometheus sidecar (serving engines that expose `/metrics`).
    #[serde(default)]
    pub server_metrics: Option<String>,
    /// The headline energy attributed to each successful request inside the window, J
    /// (`requests.parquet` `energy_j`); null when it could not be attributed.
    #[serde(default)]
    pub energy_per_request_j: Option<Distribution>,
    /// Each such request's energy over its output tokens, mJ per token.
    #[serde(default)]
    pub energy_per_response_token_mj: Option<Distribution>,
    /// What bounds the headline energy (resolution at the window's edges, coverage, the
    /// sensors' documented accuracy); null without a headline.
    #[serde(default)]
    pub energy_uncertainty: Option<EnergyUncertainty>,
    /// The window's energy over time (`timeline.parquet`, one row per bin); null when the
    /// energy could not be cut into bins.
    #[serde(default)]
    pub timeline: Option<TimelineSummary>,
    /// Multi-turn conversations, when the traffic was (per session and per turn); null
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<ConversationsSummary>,
    /// The device settings (power limits, locked clocks, CPU frequency) the run was measured
    /// under, put back after it, and whether they held the devices back; null when the
    /// configuration set none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_settings: Option<DeviceSettingsRecord>,
}

/// The device settings a run was measured under.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSettingsRecord {
    /// Each setting on each device, in the order applied.
    pub settings: Vec<DeviceSettingRecord>,
    /// Every value was written back and read back after the run.
    pub restored: bool,
    /// Per measured device with a setting: what held it back during the window.
    pub binding: Vec<BindingRecord>,
}

/// One setting on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSettingRecord {
    /// The device (`gpu0`, `package-0`, `cpu3`).
    pub device: String,
    /// The setting (`gpu_power_limit_w`, `gpu_locked_clocks_mhz`, ...).
    pub setting: String,
    /// The value found before the run.
    pub original: String,
    /// The value asked for.
    pub requested: String,
    /// The value read back after it was set (the requested one where the device cannot read
    /// it back: NVML's locked clocks).
    pub applied: String,
    /// The value read back after the restore; null when the restore failed.
    pub restored: Option<String>,
    /// Why the restore failed; null when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_error: Option<String>,
}

/// What held one device back during the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BindingRecord {
    /// Domain (`gpu0`, `package-0`).
    pub domain: String,
    /// The power limit in force, W; null when none was set.
    pub power_limit_w: Option<f64>,
    /// Mean power over the window, W.
    pub mean_power_w: Option<f64>,
    /// Highest sampled power, W.
    pub peak_power_w: Option<f64>,
    /// Share of the window the power cap held the clocks down (GPUs: NVML's software power
    /// cap reason; CPU packages: 100 ms stretches at 97 % of the limit or more).
    pub power_cap_share: Option<f64>,
    /// Share of the window under a thermal slowdown (GPUs).
    pub thermal_share: Option<f64>,
    /// Share of the window under a hardware slowdown or power brake (GPUs).
    pub hw_slowdown_share: Option<f64>,
    /// Share of the window the clocks were held by a clock setting (GPUs: NVML's
    /// applications-clocks reason, which locked clocks raise).
    pub clock_setting_share: Option<f64>,
    /// Mean SM clock over the window, MHz (GPUs).
    pub mean_sm_clock_mhz: Option<f64>,
    /// A setting held the device back for some of the window.
    pub binding: bool,
}

/// The window in time bins: where the sidecar is, how wide a bin is, and how much of the
/// window's energy was spent with no request in flight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineSummary {
    /// Relative path of the sidecar.
    pub file: String,
    /// Bin width, s (the last bin is shorter when the window is not a whole number of bins).
    pub bin_seconds: f64,
    /// Bins.
    pub bins: usize,
    /// Energy with no request in flight over the window's energy (0-1): the cost of idle
    /// gaps between bursts.
    pub idle_energy_share: Option<f64>,
    /// Energy with no request in flight, J.
    pub idle_energy_j: f64,
}

/// The bound of the headline energy: a worst case, summed over its domains.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnergyUncertainty {
    /// The bound, J; null when a domain is an estimate (no bound exists).
    pub bound_j: Option<f64>,
    /// The bound over the energy.
    pub relative: Option<f64>,
    /// The bound per output token, mJ (the `±` of `mj_per_tok_total`).
    pub mj_per_tok: Option<f64>,
    /// What the bound leaves out.
    pub notes: Vec<String>,
    /// Per domain.
    pub domains: Vec<DomainUncertaintyRecord>,
}

/// What bounds one domain's energy over the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainUncertaintyRecord {
    /// Domain name.
    pub name: String,
    /// Sensor family (`nvml`, `rapl`, `amdgpu`, `estimate`).
    pub sensor: String,
    /// How often the counter moves, s (measured before sampling); null for a power-only
    /// sensor or when it could not be measured.
    pub update_period_s: Option<f64>,
    /// What the edges are bounded with: the update period, else the sampling interval, s.
    pub resolution_s: f64,
    /// Resolution x power at each edge of the window, summed, J.
    pub edge_bound_j: f64,
    /// Share of the window with a fresh reading.
    pub coverage: f64,
    /// Longest time between readings inside the window, s.
    pub longest_gap_s: f64,
    /// Gaps (over two sampling intervals) x peak power, J.
    pub gap_bound_j: f64,
    /// The sensor's documented relative accuracy; null when none is documented.
    pub accuracy: Option<f64>,
    /// Accuracy x energy, J.
    pub accuracy_bound_j: Option<f64>,
    /// |counter - integrated| / counter, where the sensor has both.
    pub disagreement: Option<f64>,
    /// The domain's bound, J; null for an estimate.
    pub bound_j: Option<f64>,
}

/// Mean and percentiles of a per-request figure.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Values summarised.
    pub n: usize,
}

impl Distribution {
    /// The distribution of `values` (linear percentiles, as numpy); `None` when empty.
    pub fn of(mut values: Vec<f64>) -> Option<Distribution> {
        values.retain(|v| v.is_finite());
        values.sort_by(f64::total_cmp);
        let n = values.len();
        Some(Distribution {
            mean: values.iter().sum::<f64>() / n as f64,
            p50: crate::stats::percentile(&values, 50.0)?,
            p90: crate::stats::percentile(&values, 90.0)?,
            p99: crate::stats::percentile(&values, 99.0)?,
            n,
        })
    }
}

/// The measured window of a steady-state or windowed run and its stability verdict (the
/// ML.ENERGY rule: at least 20 s long, batch utilisation at least 85 %).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SteadyStateInfo {
    /// `steady_state` or `windowed`.
    pub rule: String,
    /// Window start, s since the experiment start.
    pub start_s: f64,
    /// Window end, s since the experiment start.
    pub end_s: f64,
    /// `end_s - start_s`.
    pub duration_s: f64,
    /// Concurrency the window was defined by (`max_concurrency` or the server's batch).
    pub target_concurrency: Option<u32>,
    /// Requests of the run (N of the rule).
    pub requests: u32,
    /// Output tokens whose arrival falls inside the window.
    pub output_tokens_in_window: u64,
    /// Time-averaged sequences being decoded in the window.
    pub avg_batch_size: Option<f64>,
    /// Where `avg_batch_size` comes from: `prometheus` (the server's running requests) or
    /// `client` (requests between first token and end, seen by llem).
    pub avg_batch_size_source: Option<String>,
    /// `avg_batch_size / target_concurrency`.
    pub batch_utilisation: Option<f64>,
    /// False when the window is too short, under-utilised, or could not be formed.
    pub is_stable: bool,
    /// Why not stable; empty when stable.
    pub unstable_reason: String,
}

/// Goodput against latency objectives: a request counts when every bound set holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// TTFT bound, ms.
    pub slo_ttft_ms: Option<f64>,
    /// TPOT bound, ms.
    pub slo_tpot_ms: Option<f64>,
    /// End-to-end bound, ms.
    pub slo_e2e_ms: Option<f64>,
    /// Whether latencies were measured from the scheduled send time (true) or dispatch.
    pub from_schedule: bool,
    /// Requests considered (successful or not).
    pub requests: u32,
    /// Requests meeting every bound.
    pub requests_meeting_slo: u32,
    /// `requests_meeting_slo / requests`.
    pub goodput_fraction: f64,
    /// SLO-meeting requests per second of the measured window.
    pub goodput_req_per_s: Option<f64>,
    /// Window energy divided by SLO-meeting requests, J.
    pub energy_per_good_request_j: Option<f64>,
}

/// The traffic a serving run sent, and how faithfully the client kept its schedule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrafficSummary {
    /// `all_at_once`, `constant`, `poisson` or `gamma`.
    pub arrival: String,
    /// Target rate, requests/s.
    pub rate_qps: Option<f64>,
    /// Gamma coefficient of variation.
    pub burstiness: Option<f64>,
    /// Closed-loop concurrency cap.
    pub max_concurrency: Option<u32>,
    /// Seed of the arrival draw.
    pub seed: u64,
    /// Requests sent.
    pub requests_sent: u32,
    /// Requests that failed.
    pub requests_failed: u32,
    /// Achieved request rate over the send phase, requests/s.
    pub achieved_rate_qps: Option<f64>,
    /// Dispatch minus scheduled time, median, ms (client lag).
    pub dispatch_lag_p50_ms: Option<f64>,
    /// Dispatch minus scheduled time, 99th percentile, ms.
    pub dispatch_lag_p99_ms: Option<f64>,
    /// The base URL requests went to.
    pub endpoint: String,
    /// `completions` or `chat_completions`.
    pub api: String,
    /// Where output token counts came from: `usage` (the server) or `client` (chunk count).
    pub token_count_source: String,
    /// The trace replayed, when the traffic was one (`arrival` is then `trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReplaySummary>,
}

/// The conversations a run sent: energy, prompt growth and prefix-cache hits per session and
/// per turn. A session's energy is the sum of its requests' attributed energies, so the
/// sessions add up to the requests'.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConversationsSummary {
    /// Conversations sent.
    pub sessions: u32,
    /// Turns sent (requests), over every session.
    pub turns: u32,
    /// Think time between a reply and the next message, s.
    pub think_time_seconds: f64,
    /// Gap between the starts of consecutive conversations, s.
    pub session_interval_seconds: f64,
    /// Energy per conversation whose every turn was attributed energy, J; null without
    /// attribution.
    pub energy_per_session_j: Option<Distribution>,
    /// Prompt tokens from the prefix cache over all prompt tokens of the turns after the
    /// first (whose prompts repeat the conversation so far); null when the server does not
    /// say.
    pub later_turn_cache_hit_rate: Option<f64>,
    /// Per turn position (the first message of every conversation, the second, ...).
    pub by_turn: Vec<TurnSummary>,
    /// Per conversation.
    pub by_session: Vec<SessionSummary>,
}

/// The turns at one position of every conversation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnSummary {
    /// Position, 0 for the first message.
    pub turn: u32,
    /// Requests at this position.
    pub requests: u32,
    /// Mean prompt tokens (the conversation so far and the new message).
    pub mean_input_tokens: f64,
    /// Mean prompt tokens from the prefix cache; null when the server does not say.
    pub mean_cached_input_tokens: Option<f64>,
    /// Mean attributed energy, J; null without attribution.
    pub mean_energy_j: Option<f64>,
}

/// One conversation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Its index.
    pub session_id: u32,
    /// Turns sent.
    pub turns: u32,
    /// Turns that failed (the conversation stops at the first).
    pub failed_turns: u32,
    /// Prompt tokens over its turns.
    pub input_tokens: u64,
    /// Output tokens over its turns.
    pub output_tokens: u64,
    /// Prompt tokens from the prefix cache over its turns; null when not reported.
    pub cached_input_tokens: Option<u64>,
    /// `cached_input_tokens / input_tokens`.
    pub cache_hit_rate: Option<f64>,
    /// The sum of its turns' attributed energies, J; null when a turn has none.
    pub energy_j: Option<f64>,
}

/// A replayed trace: which part of it, how fast, and how faithfully it was replayed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceReplaySummary {
    /// The trace file.
    pub path: String,
    /// azure, burstgpt, mooncake or columns.
    pub format: String,
    /// Where the slice began, s of trace time from its first record.
    pub start_seconds: f64,
    /// The slice's length, s of trace time (null: to the trace's end).
    pub duration_seconds: Option<f64>,
    /// The factor on the trace's gaps.
    pub time_scale: f64,
    /// The model whose requests were kept, when filtered.
    pub model: Option<String>,
    /// Requests replayed.
    pub requests: u32,
    /// The replay's schedule, s (the slice scaled).
    pub span_s: f64,
    /// Records of the slice left out: another model's.
    pub skipped_other_model: u32,
    /// Left out: no prompt tokens.
    pub skipped_no_input: u32,
    /// Left out: nothing generated (a failed request in the trace).
    pub skipped_no_output: u32,
    /// Prompts cut to `max_input_tokens`.
    pub inputs_capped: u32,
    /// Output lengths cut to `max_output_tokens`.
    pub outputs_capped: u32,
    /// Requests whose prompt begins with prefix blocks an earlier request began with.
    pub shared_prefix_requests: u32,
    /// Prompt tokens in those shared blocks.
    pub shared_prefix_tokens: u64,
    /// Requests whose prompt length, as the server counted it, differs from the trace's
    /// (null: the server reported no prompt counts).
    pub inputs_inexact: Option<u32>,
    /// Successful requests that generated fewer tokens than the trace's output length.
    pub short_replies: u32,
    /// Prompt tokens the server took from its prefix cache, from its usage (null: not
    /// reported).
    pub cached_prompt_tokens: Option<u64>,
    /// False when the client fell behind the trace: 99th-percentile lateness above
    /// `late_threshold_ms`.
    pub kept_up: bool,
    /// The lateness past which a replay is not the trace's arrivals, ms.
    pub late_threshold_ms: f64,
}

/// A FLOPs estimate and how it was made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlopsEstimate {
    /// Estimated FLOPs.
    pub value: f64,
    /// `architecture`, `parameter_estimate` or `palm_formula`.
    pub method: String,
    /// `high`, `medium` or `low`.
    pub confidence: String,
    /// Compute precision (the weights' type for GGUF models).
    pub precision: String,
    /// Prefill (prompt) FLOPs.
    pub prefill_flops: f64,
    /// Decode (generation) FLOPs.
    pub decode_flops: f64,
    /// How the figure was derived.
    pub notes: Option<String>,
}

/// CO2 of a result's energy: kWh x intensity x PUE.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Emissions {
    /// CO2 of `total_energy_j` (the headline scope), g.
    pub co2_g: Option<f64>,
    /// CO2 of `energy_adjusted_j`, g.
    pub co2_adjusted_g: Option<f64>,
    /// CO2 of `system_energy_j`, g.
    pub system_co2_g: Option<f64>,
    /// Grid intensity used, gCO2/kWh.
    pub carbon_intensity_gco2_kwh: f64,
    /// Data-centre PUE applied (1.0 = none).
    pub datacenter_pue: f64,
    /// `configured` or `world_average` (no intensity configured).
    pub intensity_source: String,
}

/// Multi-GPU aggregate of a run whose engine used several GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MultiGpuMetrics {
    /// GPUs the engine ran on.
    pub num_gpus: u32,
    /// Their CUDA indices.
    pub gpu_indices: Vec<u32>,
    /// Energy of each, J, in `gpu_indices` order.
    pub energy_per_gpu_j: Vec<f64>,
    /// Sum over the GPUs, J (`total_energy_j`).
    pub total_energy_j: f64,
    /// Highest over lowest GPU energy (1.0 = balanced); null when a GPU read 0 J.
    pub energy_imbalance: Option<f64>,
}

/// How per-process results were combined.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggregationMetadata {
    /// `energy_summed_throughput_averaged` (seed 000).
    pub method: String,
    /// Processes (ranks) combined.
    pub num_processes: u32,
    /// Every process was measured over the same window.
    pub same_window: bool,
    /// What weakens the aggregate.
    pub warnings: Vec<String>,
}

/// One kind of device's energy over the window (`energy_breakdown.gpu`, `.cpu_package`,
/// `.dram`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindEnergy {
    /// Energy summed over the kind's domains, J.
    pub energy_j: f64,
    /// The weakest source among them.
    pub energy_source: String,
    /// Sensor families (`nvml`, `rapl`, ...).
    pub sensors: Vec<String>,
    /// Domains summed.
    pub domains: Vec<String>,
}

/// The whole node's energy over the window and its reconciliation with the measured
/// components (`energy_breakdown.node`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeEnergy {
    /// Node energy, J.
    pub energy_j: f64,
    /// `counter` or `integrated`.
    pub energy_source: String,
    /// `ipmi`, `redfish` or `hwmon`.
    pub sensor: String,
    /// The source, for humans (no credentials).
    pub device: String,
    /// How often the node reading moved while sampling (never finer than the polls or the
    /// period the source reports), s.
    pub update_period_s: Option<f64>,
    /// Mean node power over the window, W.
    pub avg_power_w: f64,
    /// Readings inside the window.
    pub n_samples: usize,
    /// The node energy's bound, J (edges x update period, missed polls; no documented
    /// accuracy).
    pub bound_j: Option<f64>,
    /// What bounds it, in the form `energy_uncertainty` gives the headline's domains.
    #[serde(default)]
    pub uncertainty: Option<EnergyUncertainty>,
    /// The measured components summed (every GPU, CPU package and DRAM domain), J.
    pub components_j: f64,
    /// Their domains.
    pub components: Vec<String>,
    /// Their bound, J; null when one is an estimate.
    pub components_bound_j: Option<f64>,
    /// `energy_j - components_j`, J: what no component sensor sees.
    pub unattributed_j: f64,
    /// Its bound: the node's and the components' bounds added, J; null when either is.
    pub unattributed_bound_j: Option<f64>,
    /// Idle node power from the baseline, W.
    pub baseline_power_w: Option<f64>,
    /// `energy_j` less idle node power over the window, J.
    pub adjusted_j: Option<f64>,
    /// The window is shorter than a few node update periods: each edge is uncertain by up
    /// to a period of node power, and the bound says how much.
    pub coarse_for_window: bool,
    /// Of `energy_j`: prefill, decode and idle time, split like the headline (the node's
    /// readings interpolated between its polls).
    pub prefill_j: Option<f64>,
    /// Decode.
    pub decode_j: Option<f64>,
    /// No pass running.
    pub idle_j: Option<f64>,
}

/// Energy split with the baseline's provenance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnergyBreakdown {
    /// Measured energy of the headline scope, J (`total_energy_j`).
    pub raw_j: f64,
    /// Baseline-adjusted energy of the headline scope, J.
    pub adjusted_j: Option<f64>,
    /// Idle power of the headline scope's domains, W.
    pub baseline_power_w: Option<f64>,
    /// `gpu` or `cpu`: what `raw_j` holds.
    #[serde(default)]
    pub scope: Option<String>,
    /// Domains the headline sums.
    #[serde(default)]
    pub scope_domains: Vec<String>,
    /// Every GPU measured (including GPUs the engine did not use).
    #[serde(default)]
    pub gpu: Option<KindEnergy>,
    /// CPU packages.
    #[serde(default)]
    pub cpu_package: Option<KindEnergy>,
    /// DRAM.
    #[serde(default)]
    pub dram: Option<KindEnergy>,
    /// The whole node (BMC or power meter), which encloses the kinds above, and what they
    /// leave of it.
    #[serde(default)]
    pub node: Option<NodeEnergy>,
    /// Every measured domain, J (`system_energy_j`).
    #[serde(default)]
    pub system_j: Option<f64>,
    /// Idle power of every measured domain, W.
    #[serde(default)]
    pub system_baseline_power_w: Option<f64>,
    /// `system_j` less its idle power over the window, J.
    #[serde(default)]
    pub system_adjusted_j: Option<f64>,
    /// `fresh`, `cached` or `validated`, and whether it was measured now.
    pub baseline_method: Option<String>,
    /// When the baseline was measured (UTC).
    pub baseline_timestamp: Option<String>,
    /// Age of a cached baseline, s.
    pub baseline_cache_age_sec: Option<f64>,
    /// Per energy domain.
    pub domains: Vec<DomainEnergyRecord>,
    /// Of `raw_j`: the engine's prefill passes (or, served, requests waiting for their
    /// first token), J; null when the energy could not be attributed.
    #[serde(default)]
    pub prefill_j: Option<f64>,
    /// Of `raw_j`: decode passes (served: requests streaming tokens), J.
    #[serde(default)]
    pub decode_j: Option<f64>,
    /// Of `raw_j`: time in the window with no pass running (served: no request in
    /// flight), J.
    #[serde(default)]
    pub idle_j: Option<f64>,
    /// How the window was split: `engine_steps` (the engine's own log of its passes) or
    /// `request_concurrency` (each request's share of the time it was in flight).
    #[serde(default)]
    pub attribution: Option<String>,
    /// The difference method's split (`measurement.phase_split: difference | both`), beside
    /// the attributed one.
    #[serde(default)]
    pub difference: Option<DifferenceSplit>,
}

/// optimum-benchmark's prefill/decode split: the window's prompts run again for one output
/// token each, right after the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DifferenceSplit {
    /// The one-token run's energy on the headline's devices, J: prefill and the first token.
    pub prefill_j: f64,
    /// The window's energy less it, J.
    pub decode_j: f64,
    /// How long the one-token run took, s.
    pub prefill_run_s: f64,
    /// Requests of the one-token run that succeeded.
    pub prefill_run_requests: usize,
    /// Output tokens it produced.
    pub prefill_run_output_tokens: u64,
}

/// One domain's energy over the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainEnergyRecord {
    /// `gpu0`, `package-0`, `dram-0`, `cpu`.
    pub name: String,
    /// `gpu`, `cpu` or `dram`.
    pub kind: String,
    /// Sensor family (`nvml`, `rapl`, `amdgpu`, `estimate`).
    pub sensor: String,
    /// Energy, J.
    pub energy_j: f64,
    /// Source of `energy_j`.
    pub energy_source: String,
    /// Counter energy, J.
    pub counter_j: Option<f64>,
    /// Integrated power, J.
    pub integrated_j: Option<f64>,
    /// Relative counter/integration disagreement.
    pub disagreement: Option<f64>,
    /// Mean power, W.
    pub avg_power_w: f64,
    /// Peak sampled power, W.
    pub peak_power_w: Option<f64>,
    /// Samples in the window.
    pub n_samples: usize,
}

/// One process's raw measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessResult {
    /// Process rank.
    pub process_index: u32,
    /// GPU the process drove (null on CPU).
    pub gpu_id: Option<u32>,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Window, s.
    pub inference_time_sec: f64,
    /// Energy, J.
    pub energy_j: f64,
    /// GPU energy, J.
    pub gpu_energy_j: f64,
    /// CPU energy, J.
    pub cpu_energy_j: f64,
    /// DRAM energy, J.
    pub ram_energy_j: f64,
}

/// GPU throttling during the window (all false without NVML throttle reasons).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThermalThrottleInfo {
    /// Any thermal slowdown.
    pub thermal: bool,
    /// Power cap or power brake.
    pub power: bool,
    /// Software thermal slowdown.
    pub sw_thermal: bool,
    /// Hardware thermal slowdown.
    pub hw_thermal: bool,
    /// Hardware power brake.
    pub hw_power: bool,
    /// Time throttled, s.
    pub throttle_duration_sec: f64,
    /// Hottest sampled device temperature, °C.
    pub max_temperature_c: Option<f64>,
    /// Sample times (s since start) with a throttle reason set.
    pub throttle_timestamps: Vec<f64>,
    /// Any of the above.
    pub detected: bool,
}

/// How the warmup ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WarmupResult {
    /// The CV of the last window of batches fell below the target (judged the same way in
    /// fixed mode, where it does not end the warmup; false with fewer than two batches).
    pub converged: bool,
    /// CV of the last window of batches' per-token latencies; null with fewer than two
    /// batches (the prompts of one batch share its latency: no CV can be taken over them).
    pub final_cv: Option<f64>,
    /// Warmup prompts run.
    pub iterations_completed: u32,
    /// Configured CV target.
    pub target_cv: f64,
    /// Configured cap on warmup prompts.
    pub max_prompts: u32,
    /// Latency of each warmup prompt, ms.
    pub latencies_ms: Vec<f64>,
    /// Thermal floor wait after warmup, s.
    pub thermal_floor_wait_s: f64,
    /// `fixed` or `cv_convergence`.
    pub mode: String,
    /// The composite warmup gate, when configured.
    #[serde(default)]
    pub gate: Option<WarmupGateResult>,
}

/// What the composite warmup gate saw when it ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WarmupGateResult {
    /// Power, temperature and throttling were steady over the trailing window.
    pub passed: bool,
    /// Time spent in the gate (its warmup rounds), s.
    pub waited_s: f64,
    /// Warmup rounds run inside the gate.
    pub rounds: u32,
    /// CoV of the total sampled power over the last judged window.
    pub power_cov: Option<f64>,
    /// Spread of the hottest temperature over it, °C; null without a temperature sensor.
    pub temperature_range_c: Option<f64>,
    /// Throttle reasons seen in it (thermal, power cap, hardware), as a bitmask; 0 = none.
    pub throttle_reasons: u64,
    /// Why the last judgement failed; empty when it passed.
    pub reasons: Vec<String>,
}

/// Latency statistics, in the flat field names of the Python llem, plus p90, TPOT and E2E.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStatistics {
    /// Mean time to first token, ms.
    pub ttft_mean_ms: Option<f64>,
    /// Median TTFT, ms.
    pub ttft_median_ms: Option<f64>,
    /// 90th percentile TTFT, ms.
    pub ttft_p90_ms: Option<f64>,
    /// 95th percentile TTFT, ms.
    pub ttft_p95_ms: Option<f64>,
    /// 99th percentile TTFT, ms.
    pub ttft_p99_ms: Option<f64>,
    /// Fastest TTFT, ms.
    pub ttft_min_ms: Option<f64>,
    /// Slowest TTFT, ms.
    pub ttft_max_ms: Option<f64>,
    /// Requests with a first token.
    pub ttft_samples: usize,
    /// Mean inter-token latency (first and last interval of each request excluded), ms.
    pub itl_mean_ms: Option<f64>,
    /// Median trimmed ITL, ms.
    pub itl_median_ms: Option<f64>,
    /// 90th percentile trimmed ITL, ms.
    pub itl_p90_ms: Option<f64>,
    /// 95th percentile trimmed ITL, ms.
    pub itl_p95_ms: Option<f64>,
    /// 99th percentile trimmed ITL, ms.
    pub itl_p99_ms: Option<f64>,
    /// Trimmed intervals.
    pub itl_samples: usize,
    /// Mean of all intervals, ms.
    pub itl_full_mean_ms: Option<f64>,
    /// 99th percentile of all intervals, ms.
    pub itl_full_p99_ms: Option<f64>,
    /// Intervals counted in the full statistics.
    pub itl_full_samples: usize,
    /// Mean time per output token after the first, per request, ms.
    pub tpot_mean_ms: Option<f64>,
    /// Median TPOT, ms.
    pub tpot_median_ms: Option<f64>,
    /// 90th percentile TPOT, ms.
    pub tpot_p90_ms: Option<f64>,
    /// 95th percentile TPOT, ms.
    pub tpot_p95_ms: Option<f64>,
    /// 99th percentile TPOT, ms.
    pub tpot_p99_ms: Option<f64>,
    /// Requests with at least two output tokens.
    pub tpot_samples: usize,
    /// Mean end-to-end latency, ms.
    pub e2e_mean_ms: Option<f64>,
    /// Median E2E latency, ms.
    pub e2e_median_ms: Option<f64>,
    /// 90th percentile E2E latency, ms.
    pub e2e_p90_ms: Option<f64>,
    /// 95th percentile E2E latency, ms.
    pub e2e_p95_ms: Option<f64>,
    /// 99th percentile E2E latency, ms.
    pub e2e_p99_ms: Option<f64>,
    /// Requests counted.
    pub e2e_samples: usize,
    /// `true_streaming`, `proportional` or `per_request_batch`.
    pub measurement_mode: String,
    /// TTFT measured from the scheduled send time (coordinated-omission safe), median, ms.
    #[serde(default)]
    pub scheduled_ttft_median_ms: Option<f64>,
    /// The same, 99th percentile, ms.
    #[serde(default)]
    pub scheduled_ttft_p99_ms: Option<f64>,
    /// End-to-end latency from the scheduled send time, median, ms.
    #[serde(default)]
    pub scheduled_e2e_median_ms: Option<f64>,
    /// The same, 99th percentile, ms.
    #[serde(default)]
    pub scheduled_e2e_p99_ms: Option<f64>,
}

/// Extended efficiency metrics: always present, leaves null when not computable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtendedEfficiencyMetrics {
    /// Mean time per output token, ms.
    pub tpot_ms: Option<f64>,
    /// Throughput x tokens per joule x precision factor.
    pub token_efficiency_index: Option<f64>,
    /// Memory.
    pub memory: MemoryEfficiencyMetrics,
    /// Device utilisation.
    pub gpu_utilisation: GpuUtilisationMetrics,
    /// Static batching efficiency.
    pub batch: BatchEfficiencyMetrics,
    /// KV cache (serving engines).
    pub kv_cache: KvCacheEfficiencyMetrics,
    /// Per-request end-to-end latency.
    pub request_latency: RequestLatencyMetrics,
}

/// Memory metrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryEfficiencyMetrics {
    /// Device (or host) memory, MB.
    pub total_vram_mb: Option<f64>,
    /// Model weights, MB.
    pub model_memory_mb: Option<f64>,
    /// Peak memory during the window, MB.
    pub peak_memory_mb: Option<f64>,
    /// Peak minus model memory, MB.
    pub inference_memory_mb: Option<f64>,
    /// KV cache, MB.
    pub kv_cache_mb: Option<f64>,
    /// Output tokens per GB of peak memory.
    pub tokens_per_gb_vram: Option<f64>,
    /// Model memory / total memory.
    pub model_memory_utilisation: Option<f64>,
    /// KV cache / peak memory.
    pub kv_cache_memory_ratio: Option<f64>,
    /// Where the memory figures come from (`nvml`, `process_rss`).
    pub memory_source: Option<String>,
}

/// Utilisation metrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuUtilisationMetrics {
    /// Mean SM utilisation, %.
    pub sm_utilisation_mean: Option<f64>,
    /// Samples behind it.
    pub sm_utilisation_samples: usize,
    /// Mean memory-controller activity, %.
    pub memory_bandwidth_utilisation: Option<f64>,
    /// Mean CPU utilisation of the llem process over the window, % of one core.
    pub process_cpu_pct: Option<f64>,
    /// CPU time of llem's telemetry sampler thread over the whole experiment, s (the
    /// measurement's own cost).
    pub sampler_cpu_s: Option<f64>,
}

/// Batch efficiency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchEfficiencyMetrics {
    /// The batch the cell was configured to run under, resolved once per cell: the embedded
    /// engine's `batch_size`, the transformers rows per `generate()`, a server's
    /// `traffic.max_concurrency` or batch-limit field (null: the server decided).
    pub configured_batch_size: Option<u32>,
    /// Mean sequences per batch.
    pub effective_batch_size: Option<f64>,
    /// Effective / configured batch size.
    pub batch_utilisation: Option<f64>,
    /// Idle decode slots (finished sequences waiting for their batch) / all slots.
    pub padding_overhead: Option<f64>,
    /// Batches.
    pub num_batches: Option<u32>,
}

/// KV-cache metrics (serving engines).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KvCacheEfficiencyMetrics {
    /// Prefix cache hit rate from the server's Prometheus counters or gauge, 0-1.
    pub kv_cache_hit_rate: Option<f64>,
    /// Prompt tokens of the measured requests the server answered from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`, summed); null when no answer said.
    #[serde(default)]
    pub cached_prompt_tokens: Option<u64>,
    /// `cached_prompt_tokens` / the prompt tokens of the same requests, 0-1.
    #[serde(default)]
    pub prompt_cache_hit_rate: Option<f64>,
    /// Blocks used.
    pub kv_cache_blocks_used: Option<u64>,
    /// Blocks available.
    pub kv_cache_blocks_total: Option<u64>,
    /// Mean KV-cache usage in the window, fraction 0-1 (the server's gauge).
    #[serde(default)]
    pub kv_cache_usage_mean: Option<f64>,
    /// Mean requests waiting in the server's queue in the window.
    #[serde(default)]
    pub num_requests_waiting_mean: Option<f64>,
    /// How the server's prefix cache was emptied before the measured run (`POST
    /// /reset_prefix_cache` on vLLM, `POST /flush_cache` on SGLang, every slot erased on
    /// llama-server); null when it was not (TGI, TensorRT-LLM, servers llem did not start):
    /// every cell still starts a fresh server.
    #[serde(default)]
    pub prefix_cache_reset: Option<String>,
}

/// Per-request end-to-end latency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestLatencyMetrics {
    /// Mean, ms.
    pub e2e_latency_mean_ms: Option<f64>,
    /// Median, ms.
    pub e2e_latency_median_ms: Option<f64>,
    /// 95th percentile, ms.
    pub e2e_latency_p95_ms: Option<f64>,
    /// 99th percentile, ms.
    pub e2e_latency_p99_ms: Option<f64>,
    /// Requests.
    pub e2e_latency_samples: usize,
}

/// Where the result came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// llem version.
    pub llem_version: String,
    /// Git commit llem was built from.
    pub llem_git_commit: Option<String>,
    /// Host name.
    pub hostname: String,
    /// Operating system and kernel.
    pub os: String,
    /// CPU model.
    pub cpu_model: Option<String>,
    /// Logical CPUs available to the process.
    pub cpu_count: usize,
    /// Physical memory, MiB.
    pub memory_total_mib: Option<f64>,
    /// GPUs: name per device.
    pub gpus: Vec<String>,
    /// GPU driver version.
    pub gpu_driver: Option<String>,
    /// The energy sampler and the sensors it used.
    pub energy_sampler: String,
    /// Sensors, one per domain (`package-0: rapl`).
    pub sensors: Vec<String>,
    /// Sampling interval, ms.
    pub sampling_interval_ms: f64,
    /// Engine backend details (llama.cpp system info).
    pub engine_system_info: Option<String>,
    /// The model as the engine saw it.
    pub model: Option<ModelDescription>,
}

/// The model as loaded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelDescription {
    /// Architecture (`llama`, `qwen2`, ...).
    pub architecture: Option<String>,
    /// Parameters.
    pub parameters: Option<u64>,
    /// Transformer layers.
    pub layers: Option<u32>,
    /// Hidden (embedding) size.
    pub hidden_size: Option<u32>,
    /// Attention heads.
    pub attention_heads: Option<u32>,
    /// Key/value heads.
    pub kv_heads: Option<u32>,
    /// Per-head dimension of keys and queries.
    pub head_dim: Option<u32>,
    /// Feed-forward size.
    pub ffn_size: Option<u32>,
    /// Vocabulary size.
    pub vocab_size: Option<u32>,
    /// Training context length.
    pub context_length: Option<u32>,
    /// Weight type or quantisation (`Q4_1`, `bf16`).
    pub dtype: Option<String>,
    /// Model file size, bytes.
    pub file_size_bytes: Option<u64>,
    /// Bytes of weights resident after load.
    pub weights_bytes: Option<u64>,
    /// Input and output embeddings share one matrix.
    pub tied_embeddings: Option<bool>,
    /// Time to load, s (set by the harness).
    pub load_time_s: Option<f64>,
}

/// One phase of an experiment on the experiment's clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseSpan {
    /// `baseline`, `load`, `warmup`, `thermal_floor`, `measure` or `teardown`.
    pub phase: String,
    /// Start, s since the experiment start.
    pub start_s: f64,
    /// End, s since the experiment start.
    pub end_s: f64,
    /// Energy of the headline's devices (`energy_scope`) over the phase, J: from the
    /// telemetry, or for `baseline` its measured idle power times its length; null when not
    /// measured (no sensor, or a domain of the scope unmeasured).
    #[serde(default)]
    pub energy_j: Option<f64>,
    /// The whole node's energy over the phase (a node power sensor's), J; for `baseline` its
    /// idle node power times its length; null without a node sensor.
    #[serde(default)]
    pub node_energy_j: Option<f64>,
}

/// Below this share of the raw energy, baseline-adjusted energy is mostly the noise of
/// subtracting two near-equal figures (the window drew barely more than idle): it is flagged,
/// and summaries lead with the raw figure instead.
pub const DEGENERATE_ADJUSTED_SHARE: f64 = 0.05;

impl ExperimentResult {
    /// The headline figures no measurement can produce: negative or non-finite energy, time,
    /// rates or FLOPs (a hand-edited or corrupted file). The adjusted energy may be negative
    /// (a baseline above the window's draw is flagged elsewhere) but must be finite.
    pub fn impossible_values(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |name: &str, v: Option<f64>, may_be_negative: bool| {
            if let Some(x) = v
                && (!x.is_finite() || (x < 0.0 && !may_be_negative))
            {
                out.push(format!("{name} = {x}"));
            }
        };
        check("total_energy_j", Some(self.total_energy_j), false);
        check("energy_adjusted_j", self.energy_adjusted_j, true);
        check(
            "total_inference_time_sec",
            Some(self.total_inference_time_sec),
            false,
        );
        check("duration_sec", Some(self.duration_sec), false);
        check(
            "avg_tokens_per_second",
            Some(self.avg_tokens_per_second),
            false,
        );
        check(
            "avg_energy_per_token_j",
            Some(self.avg_energy_per_token_j),
            false,
        );
        check("mj_per_tok_total", self.mj_per_tok_total, false);
        check("tokens_per_joule", Some(self.tokens_per_joule), false);
        check("system_energy_j", self.system_energy_j, false);
        check("total_flops", self.total_flops, false);
        out
    }
}

/// Whether `adjusted` energy (or energy per token) is under [`DEGENERATE_ADJUSTED_SHARE`]
/// of `raw`.
pub fn adjusted_is_degenerate(adjusted: f64, raw: f64) -> bool {
    raw > 0.0 && adjusted < DEGENERATE_ADJUSTED_SHARE * raw
}

/// Methodology `windows` (llem 0.7's server mode): consecutive windows after a ramp.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowsResult {
    /// Windows measured.
    pub n_windows: u32,
    /// Length of each, s.
    pub window_seconds: f64,
    /// Traffic discarded before the first, s.
    pub ramp_exclusion_seconds: f64,
    /// Largest coefficient of variation of the windows' mJ/token for a valid cell.
    pub cov_threshold: f64,
    /// The windows agree: each has energy and tokens, and their mJ/token CoV is within the
    /// threshold. An invalid cell is kept, with the reason.
    pub valid: bool,
    /// Why it is not valid; empty when it is.
    pub invalid_reason: String,
    /// The windows' mJ/token (headline energy scope) across windows, with its 95 % CI.
    pub mj_per_tok: Option<crate::MetricStatistics>,
    /// Output tokens per second across windows.
    pub tokens_per_second: Option<crate::MetricStatistics>,
    /// Average power of the headline scope across windows, W.
    pub avg_power_w: Option<crate::MetricStatistics>,
    /// Each window.
    pub windows: Vec<WindowResult>,
}

/// One window of methodology `windows`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowResult {
    /// 0-based position.
    pub index: u32,
    /// Start, s since the experiment start.
    pub start_s: f64,
    /// End, s since the experiment start.
    pub end_s: f64,
    /// Energy of the headline scope in the window, J; null when it was not measured.
    pub energy_j: Option<f64>,
    /// Where it came from (`counter`, `integrated`, `estimate`).
    pub energy_source: Option<String>,
    /// Output tokens that arrived in the window.
    pub output_tokens: u64,
    /// Requests that finished in the window.
    pub requests_completed: u64,
    /// `energy_j / output_tokens`, mJ; null without energy or tokens.
    pub mj_per_tok: Option<f64>,
    /// Output tokens per second.
    pub tokens_per_second: f64,
    /// Average power of the headline scope, W.
    pub avg_power_w: Option<f64>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    /// A result read back must hold the very numbers written: a window edge one ULP off moves
    /// a request ending on it outside the window (serde_json's fast float parser did this to
    /// about one value in eight until `float_roundtrip` was enabled).
    #[test]
    fn numbers_read_back_from_json_are_the_numbers_written() {
        for v in [
            26.568_719_780_054_394_f64,
            25.072_122_290_393_406,
            14.338_580_964_948_875,
        ] {
            let window = [0.5, v];
            let text = serde_json::to_string(&window).unwrap();
            let back: [f64; 2] = serde_json::from_str(&text).unwrap();
            assert_eq!(back[1].to_bits(), v.to_bits(), "{text}");
        }
    }
}
