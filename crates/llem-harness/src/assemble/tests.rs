//! `assemble::result` on hand-made inputs: a telemetry recording written sample by sample,
//! request records with known token times, and the figures worked out by hand.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::float_cmp)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use llem_config::ExperimentConfig;
use llem_energy::baseline::{BaselineOrigin, BaselineOutcome, BaselineRecord};
use llem_energy::telemetry::{SamplerStats, Series};
use llem_energy::{Domain, DomainKind, Reading, SensorEnv, SensorKind, Telemetry};
use llem_engines::placement::Placement;
use llem_engines::{EngineInfo, ModelInfo, RunSummary};
use llem_results::{FinishReason, RequestRecord};

use super::{HostMemory, Measured, result};
use crate::request::ExperimentRequest;

/// A domain whose counter rises `watts` J every second, sampled every 0.5 s over [0, 10] s.
fn counter_series(name: &str, kind: DomainKind, index: u32, watts: f64) -> Series {
    let domain = Domain {
        name: name.into(),
        kind,
        index,
        device: "test".into(),
    };
    let sensor = if kind == DomainKind::Gpu {
        SensorKind::Nvml
    } else {
        SensorKind::Rapl
    };
    let mut s = Series::new(domain, sensor, true, false);
    for i in 0..=20 {
        let t = f64::from(i) * 0.5;
        s.push(
            t,
            &Reading {
                energy_j: Some(t * watts),
                ..Reading::default()
            },
        );
    }
    s
}

/// A CPU package whose counter rises 10 J every second, sampled every 0.5 s over [0, 10] s.
fn package_at_10_w() -> Telemetry {
    telemetry(vec![counter_series(
        "package-0",
        DomainKind::CpuPackage,
        0,
        10.0,
    )])
}

/// A GPU host: gpu0 at 200 W, gpu1 at 100 W, package-0 at 50 W, dram-0 at 5 W.
fn gpu_host() -> Telemetry {
    telemetry(vec![
        counter_series("gpu0", DomainKind::Gpu, 0, 200.0),
        counter_series("gpu1", DomainKind::Gpu, 1, 100.0),
        counter_series("package-0", DomainKind::CpuPackage, 0, 50.0),
        counter_series("dram-0", DomainKind::Dram, 0, 5.0),
    ])
}

fn telemetry(series: Vec<Series>) -> Telemetry {
    Telemetry {
        series,
        stats: SamplerStats {
            interval_s: 0.5,
            ..SamplerStats::default()
        },
        start_s: 0.0,
        end_s: 10.0,
    }
}

/// `n` requests of 10 input tokens, each streaming one token per second from `first` on.
fn records(n: u32, tokens: u32, first: f64) -> Vec<RequestRecord> {
    (0..n)
        .map(|i| {
            let times: Vec<f64> = (0..tokens).map(|k| first + f64::from(k)).collect();
            RequestRecord {
                session: None,
                energy: None,
                request_id: i,
                batch_index: Some(0),
                input_tokens: 10,
                output_tokens: tokens,
                reference_output_tokens: None,
                cached_input_tokens: None,
                scheduled_s: None,
                submit_s: 0.0,
                first_token_s: times.first().copied(),
                end_s: times.last().copied().unwrap_or(first),
                success: true,
                error: None,
                finish_reason: FinishReason::Length,
                token_times_s: times,
            }
        })
        .collect()
}

fn config() -> ExperimentConfig {
    serde_json::from_value(serde_json::json!({"model": "m.gguf", "llamacpp": {"batch_size": 4}}))
        .unwrap()
}

fn request(cfg: &ExperimentConfig) -> ExperimentRequest<'_> {
    ExperimentRequest {
        config: cfg,
        config_hash: "abc",
        experiment_id: "exp".into(),
        cell_dir: PathBuf::from("/nonexistent"),
        assets_dir: PathBuf::from("/nonexistent"),
        cache_dir: PathBuf::from("/nonexistent"),
        device_journal_dir: PathBuf::from("/nonexistent"),
        sensor_env: SensorEnv::from_process(None),
        sampling_interval: Duration::from_millis(100),
        llem_version: "0.0.0",
        git_commit: None,
        cancel: Arc::new(AtomicBool::new(false)),
        python: None,
        model_cache_dir: None,
        runnable_checked: true,
        carbon_intensity_gco2_kwh: None,
        datacenter_pue: None,
        plan_warnings: Vec::new(),
        live: None,
    }
}

/// A baseline of `watts` on package-0 alone.
fn baseline(watts: f64) -> BaselineOutcome {
    baseline_of(&[("package-0", watts)])
}

/// A baseline with the idle power of each named domain.
fn baseline_of(power: &[(&str, f64)]) -> BaselineOutcome {
    BaselineOutcome {
        record: BaselineRecord {
            power_w: power
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect::<BTreeMap<_, _>>(),
            total_power_w: power.iter().map(|(_, v)| v).sum(),
            duration_s: 30.0,
            n_samples: 300,
            measured_at_unix_s: 0.0,
            host: "h".into(),
            sampler: "rapl".into(),
            devices: Vec::new(),
            uses_since_check: 0,
        },
        origin: BaselineOrigin::Fresh,
        spot_check: None,
        age_s: None,
    }
}

/// The inputs every case shares; each case overrides what it is about.
struct Inputs {
    engine: EngineInfo,
    model: ModelInfo,
    summary: RunSummary,
}

impl Inputs {
    fn new() -> Inputs {
        Inputs {
            engine: EngineInfo {
                name: "llamacpp",
                version: None,
                system_info: None,
                placement: None,
            },
            model: ModelInfo::default(),
            summary: RunSummary {
                num_batches: 1,
                effective_batch_size: 2.0,
                ..RunSummary::default()
            },
        }
    }

    fn measured<'a>(
        &'a self,
        req: &'a ExperimentRequest<'a>,
        records: &'a [RequestRecord],
        telemetry: &'a Telemetry,
        baseline: Option<&'a BaselineOutcome>,
    ) -> Measured<'a> {
        Measured {
            request: req,
            phases: Vec::new(),
            placement: Placement::Cpu,
            engine: &self.engine,
            model: &self.model,
            records,
            steps: &[],
            difference: None,
            summary: &self.summary,
            telemetry,
            window: (0.0, 10.0),
            workload_span: (0.0, 10.0),
            methodology: "total",
            steady_state: None,
            served: false,
            configured_batch_size: Some(4),
            start_unix: 1000.0,
            end_unix: 1012.0,
            baseline,
            warmup: None,
            warnings: vec!["from the lifecycle".into()],
            sensors: vec!["package-0: test".into()],
            gpus: Vec::new(),
            gpu_driver: None,
            load_s: 0.5,
            memory: HostMemory::default(),
            process_cpu_s: Some(5.0),
            device_settings: None,
        }
    }
}

#[test]
fn energy_tokens_and_rates_of_a_whole_run() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = records(4, 5, 1.0);
    let tel = package_at_10_w();
    let base = baseline(5.0);
    let r = result(&inputs.measured(&req, &recs, &tel, Some(&base)));
    // 10 W for 10 s; 4 requests x 5 tokens.
    assert!(
        (r.total_energy_j - 100.0).abs() < 1e-9,
        "{}",
        r.total_energy_j
    );
    assert_eq!((r.total_input_tokens, r.total_output_tokens), (40, 20));
    assert_eq!(r.avg_tokens_per_second, 2.0);
    assert_eq!(r.avg_total_tokens_per_second, 6.0);
    assert!((r.tokens_per_joule - 0.2).abs() < 1e-12);
    assert!((r.mj_per_tok_total.unwrap() - 5000.0).abs() < 1e-6);
    // Baseline 5 W over 10 s leaves 50 J.
    assert!((r.energy_adjusted_j.unwrap() - 50.0).abs() < 1e-9);
    assert!((r.mj_per_tok_adjusted.unwrap() - 2500.0).abs() < 1e-6);
    assert_eq!(r.energy_source.as_deref(), Some("counter"));
    let b = r.energy_breakdown.as_ref().unwrap();
    assert_eq!(b.baseline_method.as_deref(), Some("validated (measured)"));
    assert_eq!(b.domains.len(), 1);
    assert_eq!(b.domains[0].kind, "cpu_package");
    assert_eq!(r.process_results[0].cpu_energy_j, r.total_energy_j);
    assert_eq!(r.energy_per_device_j, None, "no GPU was measured");
    // The configured batch is written and utilisation is measured against it.
    let batch = &r.extended_metrics.batch;
    assert_eq!(batch.configured_batch_size, Some(4));
    assert_eq!(batch.batch_utilisation, Some(0.5));
    assert_eq!(
        r.extended_metrics.gpu_utilisation.process_cpu_pct,
        Some(50.0)
    );
    assert_eq!(r.environment.sampling_interval_ms, 500.0);
    assert_eq!(r.measurement_warnings[0], "from the lifecycle");
    assert_eq!(r.duration_sec, 12.0);
}

#[test]
fn a_sub_window_counts_the_tokens_that_arrived_inside_it() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    // Tokens at 1, 2, ..., 8 s.
    let recs = records(2, 8, 1.0);
    let tel = package_at_10_w();
    let mut m = inputs.measured(&req, &recs, &tel, None);
    m.window = (2.5, 6.5);
    m.methodology = "steady_state";
    let r = result(&m);
    // Tokens at 3, 4, 5, 6 s of both requests; their first tokens (1 s) are outside.
    assert_eq!((r.total_input_tokens, r.total_output_tokens), (0, 8));
    assert!(
        (r.total_energy_j - 40.0).abs() < 1e-9,
        "{}",
        r.total_energy_j
    );
    assert_eq!(r.steady_state_window, Some([2.5, 6.5]));
    assert_eq!(r.avg_tokens_per_second, 2.0);
    assert_eq!(r.energy_adjusted_j, None, "no baseline");
}

/// FLOPs describe the window's tokens, like the energy and the time they are divided by:
/// a steady-state window's FLOPs per output token are the whole run's at the same positions,
/// and its FLOPs per second its own FLOPs over its own duration.
#[test]
fn flops_cover_the_tokens_of_the_window_only() {
    let cfg = config();
    let req = request(&cfg);
    let mut inputs = Inputs::new();
    inputs.model = ModelInfo {
        parameters: Some(1_000_000),
        ..ModelInfo::default()
    };
    // Two requests, tokens at 1..8 s; the window holds those at 3..6 s, no prefill.
    let recs = records(2, 8, 1.0);
    let tel = package_at_10_w();
    let whole = result(&inputs.measured(&req, &recs, &tel, None));
    let mut m = inputs.measured(&req, &recs, &tel, None);
    m.window = (2.5, 6.5);
    m.methodology = "steady_state";
    let r = result(&m);
    // 2 x N per token, parameter estimate: 8 window tokens, no prompt.
    let f = r.flops.as_ref().unwrap();
    assert_eq!(f.method, "parameter_estimate");
    assert_eq!(f.prefill_flops, 0.0);
    assert_eq!(r.total_flops, Some(2.0e6 * 8.0));
    assert_eq!(r.flops_per_output_token, Some(2.0e6));
    assert_eq!(r.flops_per_input_token, None, "no prompt in the window");
    assert_eq!(r.flops_per_second, Some(2.0e6 * 8.0 / 4.0));
    // The whole run: 16 output and 20 input tokens.
    assert_eq!(whole.total_flops, Some(2.0e6 * 36.0));
    assert_eq!(whole.flops_per_output_token, r.flops_per_output_token);
}

#[test]
fn without_energy_the_per_token_figures_are_null_not_zero() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = records(1, 4, 1.0);
    let tel = Telemetry::default();
    let base = baseline(5.0);
    let r = result(&inputs.measured(&req, &recs, &tel, Some(&base)));
    assert_eq!(r.total_energy_j, 0.0);
    assert_eq!(r.mj_per_tok_total, None);
    assert_eq!(
        r.energy_adjusted_j, None,
        "a baseline adjusts nothing without energy"
    );
    assert_eq!(r.mj_per_tok_adjusted, None);
    assert_eq!(r.extended_metrics.token_efficiency_index, None);
    assert_eq!(r.energy_source, None);
    // The sampling interval falls back to the one asked for.
    assert_eq!(r.environment.sampling_interval_ms, 100.0);
}

#[test]
fn a_server_with_an_open_batch_has_no_utilisation() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = records(3, 4, 1.0);
    let tel = package_at_10_w();
    let mut m = inputs.measured(&req, &recs, &tel, None);
    m.served = true;
    m.configured_batch_size = None;
    let r = result(&m);
    let batch = &r.extended_metrics.batch;
    assert_eq!(batch.configured_batch_size, None);
    assert_eq!(batch.batch_utilisation, None);
    assert_eq!((batch.num_batches, batch.padding_overhead), (None, None));
    // Three requests decoding from 1 s to 4 s of a 10 s window: 0.9 on average.
    assert!((batch.effective_batch_size.unwrap() - 0.9).abs() < 1e-9);
    assert_eq!(
        r.extended_metrics.memory.memory_source.as_deref(),
        Some("none"),
        "llem's own memory says nothing about a server's"
    );
}

#[test]
fn on_a_gpu_the_headline_is_the_engines_gpu_and_the_host_is_reported_beside_it() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = records(4, 5, 1.0);
    let tel = gpu_host();
    let base = baseline_of(&[
        ("gpu0", 60.0),
        ("gpu1", 30.0),
        ("package-0", 20.0),
        ("dram-0", 2.0),
    ]);
    let mut m = inputs.measured(&req, &recs, &tel, Some(&base));
    m.placement = Placement::Gpus(vec![0]);
    m.sensors = vec!["gpu0: H100".into(), "gpu1: H100".into()];
    let r = result(&m);
    // gpu0 alone: 200 W x 10 s; its own idle 60 W is subtracted, not the host's.
    assert_eq!(r.energy_scope.as_deref(), Some("gpu"));
    assert!(
        (r.total_energy_j - 2000.0).abs() < 1e-6,
        "{}",
        r.total_energy_j
    );
    assert!((r.energy_adjusted_j.unwrap() - 1400.0).abs() < 1e-6);
    assert_eq!(r.baseline_power_w, Some(60.0));
    assert!((r.mj_per_tok_total.unwrap() - 100_000.0).abs() < 1e-3);
    assert!((r.tokens_per_joule - 0.01).abs() < 1e-12);
    // Everything measured: 355 W x 10 s, less 112 W of idle.
    assert!((r.system_energy_j.unwrap() - 3550.0).abs() < 1e-6);
    assert!((r.system_mj_per_tok.unwrap() - 177_500.0).abs() < 1e-3);
    let b = r.energy_breakdown.as_ref().unwrap();
    assert_eq!(b.scope.as_deref(), Some("gpu"));
    assert_eq!(b.scope_domains, ["gpu0"]);
    assert!((b.system_adjusted_j.unwrap() - 2430.0).abs() < 1e-6);
    assert!((b.gpu.as_ref().unwrap().energy_j - 3000.0).abs() < 1e-6);
    assert_eq!(b.gpu.as_ref().unwrap().sensors, ["nvml"]);
    assert!((b.cpu_package.as_ref().unwrap().energy_j - 500.0).abs() < 1e-6);
    assert!((b.dram.as_ref().unwrap().energy_j - 50.0).abs() < 1e-6);
    assert_eq!(r.energy_per_device_j.as_ref().unwrap().len(), 1);
    // One process, on gpu0, holding the headline.
    assert_eq!(r.process_results.len(), 1);
    assert_eq!(r.process_results[0].gpu_id, Some(0));
    assert!((r.process_results[0].energy_j - 2000.0).abs() < 1e-6);
    assert_eq!(r.multi_gpu, None);
    // CO2 at the world average when none is configured, said so.
    let e = r.emissions.as_ref().unwrap();
    assert_eq!(e.intensity_source, "world_average");
    assert!((e.co2_g.unwrap() - 2000.0 / 3.6e6 * 475.0).abs() < 1e-9);
    assert!((e.system_co2_g.unwrap() - 3550.0 / 3.6e6 * 475.0).abs() < 1e-9);
    assert!(
        r.measurement_warnings
            .iter()
            .any(|w| w.contains("world average")),
        "{:?}",
        r.measurement_warnings
    );
}

#[test]
fn on_the_cpu_the_headline_is_package_plus_dram_even_on_a_gpu_host() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = records(4, 5, 1.0);
    let tel = gpu_host();
    let r = result(&inputs.measured(&req, &recs, &tel, None));
    assert_eq!(r.energy_scope.as_deref(), Some("cpu"));
    assert!(
        (r.total_energy_j - 550.0).abs() < 1e-6,
        "{}",
        r.total_energy_j
    );
    assert!((r.system_energy_j.unwrap() - 3550.0).abs() < 1e-6);
    assert_eq!(r.energy_per_device_j, None, "the engine used no GPU");
    assert_eq!(r.process_results[0].gpu_id, None);
}

#[test]
fn several_gpus_give_one_process_per_rank_energy_summed() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = records(4, 5, 1.0);
    let tel = gpu_host();
    let mut m = inputs.measured(&req, &recs, &tel, None);
    m.placement = Placement::Gpus(vec![0, 1]);
    let r = result(&m);
    assert!((r.total_energy_j - 3000.0).abs() < 1e-6);
    assert_eq!(r.process_results.len(), 2);
    assert_eq!(
        r.process_results
            .iter()
            .map(|p| (p.process_index, p.gpu_id))
            .collect::<Vec<_>>(),
        [(0, Some(0)), (1, Some(1))]
    );
    let sum: f64 = r.process_results.iter().map(|p| p.energy_j).sum();
    assert!((sum - r.total_energy_j).abs() < 1e-6);
    let mg = r.multi_gpu.as_ref().unwrap();
    assert_eq!((mg.num_gpus, mg.gpu_indices.clone()), (2, vec![0, 1]));
    assert!((mg.energy_imbalance.unwrap() - 2.0).abs() < 1e-9);
    let agg = r.aggregation.as_ref().unwrap();
    assert_eq!(agg.method, "energy_summed_throughput_averaged");
    assert_eq!(agg.num_processes, 2);
    assert_eq!(r.energy_per_device_j.as_ref().unwrap().len(), 2);
}

#[test]
fn a_gpu_engine_without_a_gpu_sensor_has_no_headline_and_says_so() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = records(4, 5, 1.0);
    let tel = package_at_10_w();
    let mut m = inputs.measured(&req, &recs, &tel, None);
    m.placement = Placement::Gpus(vec![0]);
    let r = result(&m);
    assert_eq!(r.total_energy_j, 0.0);
    assert_eq!(r.energy_source, None);
    assert_eq!(r.mj_per_tok_total, None);
    assert!((r.system_energy_j.unwrap() - 100.0).abs() < 1e-6);
    assert!(
        r.measurement_warnings
            .iter()
            .any(|w| w.starts_with("headline energy not measured") && w.contains("GPU 0")),
        "{:?}",
        r.measurement_warnings
    );
    let e = r.emissions.as_ref().unwrap();
    assert_eq!(e.co2_g, None);
    assert!(e.system_co2_g.is_some());
}

#[test]
fn a_gpu_lost_mid_run_leaves_the_headline_null_not_short() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = records(4, 5, 1.0);
    // gpu1 answers until 4 s of the 10 s recording, then falls off the bus.
    let mut tel = gpu_host();
    let gpu1 = &mut tel.series[1];
    let mut lost = Series::new(gpu1.domain.clone(), SensorKind::Nvml, true, false);
    for i in 0..=8 {
        let t = f64::from(i) * 0.5;
        lost.push(
            t,
            &Reading {
                energy_j: Some(t * 100.0),
                ..Reading::default()
            },
        );
    }
    lost.errors = 12;
    lost.first_error = Some("NVML: the GPU has fallen off the bus".into());
    *gpu1 = lost;
    let mut m = inputs.measured(&req, &recs, &tel, None);
    m.placement = Placement::Gpus(vec![0, 1]);
    let r = result(&m);
    assert_eq!(
        r.total_energy_j, 0.0,
        "not gpu0 alone, nor gpu1's first 4 s"
    );
    assert_eq!(r.energy_source, None);
    assert_eq!(r.mj_per_tok_total, None);
    let w = r.measurement_warnings.join("\n");
    assert!(
        w.contains("gpu1: no readings from 4.0 s to 10.0 s (NVML: the GPU has fallen off the bus)"),
        "{w}"
    );
    assert!(
        w.contains("ran on GPUs 0, 1, but no sensor measured GPU 1 over the window"),
        "{w}"
    );
    // What was measured is still reported beside it: gpu0, the package and DRAM.
    assert!((r.system_energy_j.unwrap() - 2550.0).abs() < 1e-6);
}

#[test]
fn cached_prompt_tokens_are_counted_and_an_unasked_hit_rate_is_flagged() {
    let inputs = Inputs::new();
    let tel = package_at_10_w();
    // Four requests of 10 prompt tokens: 9, 0, 0 and 0 from the cache (22.5 %).
    let mut recs = records(4, 5, 1.0);
    for (r, c) in recs.iter_mut().zip([9, 0, 0, 0]) {
        r.cached_input_tokens = Some(c);
    }
    let cfg: ExperimentConfig =
        serde_json::from_value(serde_json::json!({"model": "m", "engine": "vllm"})).unwrap();
    let req = request(&cfg);
    let r = result(&inputs.measured(&req, &recs, &tel, None));
    let kv = &r.extended_metrics.kv_cache;
    assert_eq!(kv.cached_prompt_tokens, Some(9));
    assert!((kv.prompt_cache_hit_rate.unwrap() - 0.225).abs() < 1e-9);
    assert!(
        r.measurement_warnings
            .iter()
            .any(|w| w.starts_with("22 % of prompt tokens were served from the prefix cache")),
        "{:?}",
        r.measurement_warnings
    );

    // Asked for by name: the same hits are the deployment being measured, not a flaw.
    let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
        "model": "m", "engine": "vllm", "vllm": {"engine": {"enable_prefix_caching": true}}
    }))
    .unwrap();
    let req = request(&cfg);
    let r = result(&inputs.measured(&req, &recs, &tel, None));
    assert!(
        !r.measurement_warnings
            .iter()
            .any(|w| w.contains("prefix cache")),
        "{:?}",
        r.measurement_warnings
    );

    // Under 10 %, or servers that do not say: nothing to flag, and null rather than 0.
    recs[0].cached_input_tokens = Some(3);
    let r = result(&inputs.measured(&request(&config()), &recs, &tel, None));
    assert!(
        !r.measurement_warnings
            .iter()
            .any(|w| w.contains("prefix cache"))
    );
    let none = records(4, 5, 1.0);
    let r = result(&inputs.measured(&request(&config()), &none, &tel, None));
    let kv = &r.extended_metrics.kv_cache;
    assert_eq!(
        (kv.cached_prompt_tokens, kv.prompt_cache_hit_rate),
        (None, None)
    );
}

/// Four requests streaming a token every 0.5 s from 1.25 s to 9.75 s: 6 tokens of each in
/// every 3 s window from 1 s on.
fn streaming_records() -> Vec<RequestRecord> {
    let mut recs = records(4, 0, 1.0);
    for r in &mut recs {
        r.token_times_s = (0..18).map(|k| 1.25 + 0.5 * f64::from(k)).collect();
        r.output_tokens = 18;
        r.first_token_s = Some(1.25);
        r.end_s = 9.75;
    }
    recs
}

fn windows_config() -> ExperimentConfig {
    serde_json::from_value(serde_json::json!({
        "model": "m", "engine": "openai",
        "runners": {"openai": "external:http://127.0.0.1:9"},
        "traffic": {"arrival": "constant", "rate_qps": 2},
        "measurement": {"methodology": "windows", "windows":
            {"n_windows": 3, "window_seconds": 3, "ramp_exclusion_seconds": 1, "cov_threshold": 0.05}}
    }))
    .unwrap()
}

#[test]
fn each_window_after_the_ramp_is_measured_and_steady_windows_are_valid() {
    let cfg = windows_config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = streaming_records();
    let tel = package_at_10_w();
    let mut m = inputs.measured(&req, &recs, &tel, None);
    m.methodology = "windows";
    m.window = (1.0, 10.0);
    let r = result(&m);
    let w = r.windows.as_ref().unwrap();
    assert_eq!(w.windows.len(), 3);
    for (i, x) in w.windows.iter().enumerate() {
        let start = 1.0 + 3.0 * i as f64;
        assert_eq!((x.start_s, x.end_s), (start, start + 3.0));
        assert!((x.energy_j.unwrap() - 30.0).abs() < 1e-9, "{x:?}");
        assert_eq!(x.output_tokens, 24);
        // 30 J over 24 tokens.
        assert!((x.mj_per_tok.unwrap() - 1250.0).abs() < 1e-6);
        assert!((x.tokens_per_second - 8.0).abs() < 1e-12);
        assert!((x.avg_power_w.unwrap() - 10.0).abs() < 1e-9);
    }
    assert!(w.valid, "{}", w.invalid_reason);
    let mj = w.mj_per_tok.as_ref().unwrap();
    assert_eq!(mj.n, 3);
    assert!((mj.mean - 1250.0).abs() < 1e-6);
    assert!(mj.ci95_half_width.unwrap() < 1e-6);
    assert_eq!(r.measurement_methodology, "windows");
}

#[test]
fn windows_that_disagree_are_kept_and_marked_invalid() {
    let cfg = windows_config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = streaming_records();
    // 10 W until 4 s, then 20 W: the first window costs half as much per token.
    let domain = Domain {
        name: "package-0".into(),
        kind: DomainKind::CpuPackage,
        index: 0,
        device: "test".into(),
    };
    let mut s = Series::new(domain, SensorKind::Rapl, true, false);
    for i in 0..=20 {
        let t = f64::from(i) * 0.5;
        let j = if t <= 4.0 {
            10.0 * t
        } else {
            40.0 + 20.0 * (t - 4.0)
        };
        s.push(
            t,
            &Reading {
                energy_j: Some(j),
                ..Reading::default()
            },
        );
    }
    let tel = telemetry(vec![s]);
    let mut m = inputs.measured(&req, &recs, &tel, None);
    m.methodology = "windows";
    m.window = (1.0, 10.0);
    m.steady_state = Some(llem_results::result::SteadyStateInfo {
        is_stable: true,
        ..Default::default()
    });
    let r = result(&m);
    let w = r.windows.as_ref().unwrap();
    let mj: Vec<f64> = w.windows.iter().map(|x| x.mj_per_tok.unwrap()).collect();
    assert!(
        (mj[0] - 1250.0).abs() < 1e-6 && (mj[1] - 2500.0).abs() < 1e-6,
        "{mj:?}"
    );
    assert!(!w.valid);
    assert!(
        w.invalid_reason
            .starts_with("the windows' energy per token varies by CoV 0.3"),
        "{}",
        w.invalid_reason
    );
    assert!(
        r.measurement_warnings
            .iter()
            .any(|x| x.starts_with("methodology windows: not valid")),
        "{:?}",
        r.measurement_warnings
    );
    // Kept, and the window's stability says so too.
    let ss = r.steady_state.as_ref().unwrap();
    assert!(!ss.is_stable);
    assert!(r.total_energy_j > 0.0);
}

#[test]
fn an_adjusted_energy_near_zero_is_flagged_not_passed_off() {
    let cfg = config();
    let req = request(&cfg);
    let inputs = Inputs::new();
    let recs = records(4, 5, 1.0);
    let tel = package_at_10_w();
    // 10 W measured over 10 s against a 9.8 W idle: 2 J of 100 above idle.
    let b = baseline(9.8);
    let r = result(&inputs.measured(&req, &recs, &tel, Some(&b)));
    assert!((r.energy_adjusted_j.unwrap() - 2.0).abs() < 1e-6);
    assert!(
        r.measurement_warnings
            .iter()
            .any(|w| w.starts_with("baseline-adjusted energy is 2.0 % of the measured 100.00 J")),
        "{:?}",
        r.measurement_warnings
    );
    // Well above idle: no warning.
    let b = baseline(5.0);
    let r = result(&inputs.measured(&req, &recs, &tel, Some(&b)));
    assert!(
        !r.measurement_warnings
            .iter()
            .any(|w| w.starts_with("baseline-adjusted"))
    );
}

#[test]
fn a_configured_intensity_is_used_and_one_in_kg_is_flagged() {
    let cfg = config();
    let mut req = request(&cfg);
    req.carbon_intensity_gco2_kwh = Some(0.233);
    req.datacenter_pue = Some(1.5);
    let inputs = Inputs::new();
    let recs = records(4, 5, 1.0);
    let tel = package_at_10_w();
    let r = result(&inputs.measured(&req, &recs, &tel, None));
    let e = r.emissions.as_ref().unwrap();
    assert_eq!(e.intensity_source, "configured");
    assert_eq!(
        (e.carbon_intensity_gco2_kwh, e.datacenter_pue),
        (0.233, 1.5)
    );
    assert!((e.co2_g.unwrap() - 100.0 / 3.6e6 * 0.233 * 1.5).abs() < 1e-12);
    assert!(
        r.measurement_warnings.iter().any(|w| w.contains("kg/kWh")),
        "{:?}",
        r.measurement_warnings
    );
}

/// A disk that refuses the last artefact (here: a directory where `result.json`'s temporary
/// file goes, as a full disk refuses it) leaves no half-set behind: the sidecars written
/// before it are removed, so a cell directory holds its whole set or nothing of it.
#[test]
fn a_failed_write_leaves_no_half_set_of_artefacts() {
    let cfg = config();
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(&cfg);
    req.cell_dir = dir.path().join("cell");
    std::fs::create_dir_all(&req.cell_dir).unwrap();
    let inputs = Inputs::new();
    let recs = records(2, 4, 1.0);
    let tel = package_at_10_w();
    let assembled = super::assembled(&inputs.measured(&req, &recs, &tel, None));
    let blocker = req
        .cell_dir
        .join(format!(".result.json.tmp-{}", std::process::id()));
    std::fs::create_dir_all(blocker.join("occupied")).unwrap();
    let e = super::write(&req, &assembled, &tel, &[]).unwrap_err();
    assert!(e.to_string().contains("result.json"), "{e}");
    let left: Vec<String> = std::fs::read_dir(&req.cell_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left,
        [blocker.file_name().unwrap().to_string_lossy()],
        "{left:?}"
    );
    std::fs::remove_dir_all(&blocker).unwrap();
    super::write(&req, &assembled, &tel, &[]).unwrap();
    for f in [
        "result.json",
        "effective_config.json",
        "requests.parquet",
        "timeseries.parquet",
        "timeline.parquet",
    ] {
        assert!(req.cell_dir.join(f).is_file(), "{f}");
    }
}
