//! The extended metrics of a result: memory, GPU utilisation, batch efficiency and KV cache,
//! each from the window of the telemetry, the engine's summary and the server's gauges.

use llem_energy::Telemetry;
use llem_engines::serving::prometheus::Gauge;
use llem_results::result::{
    BatchEfficiencyMetrics, ExtendedEfficiencyMetrics, GpuUtilisationMetrics,
    KvCacheEfficiencyMetrics, LatencyStatistics, MemoryEfficiencyMetrics,
};

use super::Measured;
use crate::{latency, window};
use llem_results::RequestRecord;
use llem_results::stats;

/// Throughput and efficiency of the window, as the extended metrics need them.
pub(super) struct Rates {
    /// Output tokens in the window.
    pub output: u64,
    /// Output tokens per second.
    pub tokens_per_s: f64,
    /// Output tokens per joule.
    pub tokens_per_joule: f64,
    /// Window energy, J.
    pub total_j: f64,
}

/// `extended_metrics`.
pub(super) fn extended(
    m: &Measured<'_>,
    rates: &Rates,
    lat: Option<&LatencyStatistics>,
) -> ExtendedEfficiencyMetrics {
    let (t0, t1) = m.window;
    let duration = (t1 - t0).max(0.0);
    let (sm_mean, sm_n) = mean_in_window(m.telemetry, t0, t1, |s| &s.sm_util_pct, true);
    let (mem_mean, _) = mean_in_window(m.telemetry, t0, t1, |s| &s.mem_util_pct, true);
    ExtendedEfficiencyMetrics {
        tpot_ms: lat.and_then(|l| l.tpot_mean_ms),
        token_efficiency_index: (rates.tokens_per_s > 0.0
            && rates.total_j > 0.0
            && rates.output > 0)
            .then(|| {
                rates.tokens_per_s
                    * rates.tokens_per_joule
                    * super::notes::precision_factor(m.model.dtype.as_deref())
            }),
        memory: memory(m, rates.output),
        gpu_utilisation: GpuUtilisationMetrics {
            sm_utilisation_mean: sm_mean,
            sm_utilisation_samples: sm_n,
            memory_bandwidth_utilisation: mem_mean,
            process_cpu_pct: m
                .process_cpu_s
                .filter(|_| duration > 0.0)
                .map(|c| c / duration * 100.0),
            sampler_cpu_s: m.telemetry.stats.thread_cpu_s,
        },
        batch: batch(m),
        kv_cache: kv_cache(m),
        request_latency: latency::request_latency(m.records),
    }
}

/// Memory: the engine's own figure when it runs in its own process, the GPU's when layers
/// were offloaded or a server ran and NVML reports it, else llem's host memory.
pub(super) fn memory(m: &Measured<'_>, output: u64) -> MemoryEfficiencyMetrics {
    let (t0, t1) = m.window;
    let gpu_peak = max_in_window(m.telemetry, t0, t1, |s| &s.memory_used_mib);
    let gpu_total = max_in_window(m.telemetry, t0, t1, |s| &s.memory_total_mib);
    let weights_mb = m.model.weights_bytes.map(|b| b as f64 / 1_048_576.0);
    let kv_mb = m.summary.kv_cache_bytes.map(|b| b as f64 / 1_048_576.0);
    let (total_mb, peak_mb, source) = if let Some(em) = &m.summary.memory {
        // An engine in its own process (the transformers worker) knows its own peak:
        // torch's allocator on a GPU, the worker's resident set on a CPU.
        let total = em.total_mib.or(if em.source == "worker_rss" {
            crate::environment::memory_total_mib()
        } else {
            gpu_total
        });
        (total, Some(em.peak_mib), em.source)
    } else if (m.served || m.offloaded()) && gpu_peak.is_some() {
        (gpu_total, gpu_peak, "nvml")
    } else if m.served {
        // llem's own memory says nothing about the server's.
        (None, None, "none")
    } else {
        (
            crate::environment::memory_total_mib(),
            m.memory.peak_rss_mib,
            "process_rss",
        )
    };
    MemoryEfficiencyMetrics {
        total_vram_mb: total_mb,
        model_memory_mb: weights_mb,
        peak_memory_mb: peak_mb,
        inference_memory_mb: peak_mb.zip(weights_mb).map(|(p, w)| (p - w).max(0.0)),
        kv_cache_mb: kv_mb,
        tokens_per_gb_vram: peak_mb
            .filter(|p| *p > 0.0)
            .map(|p| output as f64 / (p / 1024.0)),
        model_memory_utilisation: weights_mb
            .zip(total_mb)
            .filter(|(_, t)| *t > 0.0)
            .map(|(w, t)| w / t),
        kv_cache_memory_ratio: kv_mb
            .zip(peak_mb)
            .filter(|(_, p)| *p > 0.0)
            .map(|(k, p)| k / p),
        memory_source: Some(source.into()),
    }
}

/// Batch efficiency against the cell's configured batch.
pub(super) fn batch(m: &Measured<'_>) -> BatchEfficiencyMetrics {
    let (t0, t1) = m.window;
    if m.served {
        // A server batches continuously: its batch is what it was running, on average, in
        // the window (its own gauge when scraped, else what the client saw).
        let avg = window::avg_batch(m.records, &m.summary.server_metrics, t0, t1).map(|(v, _)| v);
        BatchEfficiencyMetrics {
            effective_batch_size: avg,
            batch_utilisation: avg
                .zip(m.configured_batch_size)
                .map(|(a, b)| a / f64::from(b)),
            configured_batch_size: m.configured_batch_size,
            padding_overhead: None,
            num_batches: None,
        }
    } else {
        BatchEfficiencyMetrics {
            effective_batch_size: Some(m.summary.effective_batch_size),
            batch_utilisation: m
                .configured_batch_size
                .map(|b| m.summary.effective_batch_size / f64::from(b)),
            configured_batch_size: m.configured_batch_size,
            padding_overhead: Some(m.summary.padding_overhead),
            num_batches: Some(m.summary.num_batches),
        }
    }
}

/// Prompt tokens served from the prefix cache and their share of the prompt tokens, over the
/// requests whose usage said (null when none did).
fn cached_prompt_tokens(records: &[RequestRecord]) -> (Option<u64>, Option<f64>) {
    let said: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.success && r.cached_input_tokens.is_some())
        .collect();
    if said.is_empty() {
        return (None, None);
    }
    let cached: u64 = said
        .iter()
        .map(|r| u64::from(r.cached_input_tokens.unwrap_or(0)))
        .sum();
    let prompt: u64 = said.iter().map(|r| u64::from(r.input_tokens)).sum();
    (
        Some(cached),
        (prompt > 0).then(|| cached as f64 / prompt as f64),
    )
}

/// Above this share of prompt tokens from the prefix cache, a run the user did not ask to
/// cache is flagged: those tokens skipped prefill, so TTFT and energy per token read low.
pub(super) const UNINTENDED_HIT_RATE_WARN: f64 = 0.10;

/// The warning for a prefix-cache hit rate the configuration did not ask for.
pub(super) fn prefix_cache_warning(
    cfg: &llem_config::ExperimentConfig,
    kv: &KvCacheEfficiencyMetrics,
) -> Option<String> {
    // Caching is intended when the user turned it on by name, or replays a trace.
    let asked = cfg
        .vllm
        .as_deref()
        .and_then(|v| v.engine.as_ref())
        .and_then(|e| e.enable_prefix_caching)
        == Some(true)
        || cfg.sglang.as_deref().and_then(|s| s.disable_radix_cache) == Some(false)
        // A trace replay or conversations keep the cache on: shared prefixes are the point.
        || cfg
            .traffic
            .as_deref()
            .is_some_and(|t| t.trace.is_some() || t.conversations.is_some());
    if asked {
        return None;
    }
    let (rate, from) = match (kv.prompt_cache_hit_rate, kv.kv_cache_hit_rate) {
        (Some(r), _) => (r, "the servers' usage (cached_tokens)"),
        (None, Some(r)) => (r, "the server's Prometheus counters"),
        (None, None) => return None,
    };
    (rate > UNINTENDED_HIT_RATE_WARN).then(|| {
        format!(
            "{:.0} % of prompt tokens were served from the prefix cache (from {from}), which \
             this configuration does not ask for: those tokens skipped prefill, so TTFT and \
             energy per token are lower than for uncached prompts (repeated prompts or a \
             shared prefix in the dataset)",
            rate * 100.0
        )
    })
}

/// KV-cache figures from the server's gauges and the requests' usage (null for engines
/// without them).
pub(super) fn kv_cache(m: &Measured<'_>) -> KvCacheEfficiencyMetrics {
    let (t0, t1) = m.window;
    let sm = &m.summary.server_metrics;
    let (cached, rate) = cached_prompt_tokens(m.records);
    KvCacheEfficiencyMetrics {
        kv_cache_hit_rate: window::prefix_hit_rate(sm, t0, t1),
        cached_prompt_tokens: cached,
        prompt_cache_hit_rate: rate,
        kv_cache_usage_mean: window::gauge_mean(sm, Gauge::KvCacheUsage, t0, t1),
        num_requests_waiting_mean: window::gauge_mean(sm, Gauge::Waiting, t0, t1),
        prefix_cache_reset: m.summary.prefix_cache_reset.clone(),
        ..KvCacheEfficiencyMetrics::default()
    }
}

pub(super) fn mean_in_window(
    t: &Telemetry,
    start: f64,
    end: f64,
    col: fn(&llem_energy::telemetry::Series) -> &Vec<f32>,
    gpu_only: bool,
) -> (Option<f64>, usize) {
    let mut v = Vec::new();
    for s in t
        .series
        .iter()
        .filter(|s| !gpu_only || s.domain.kind == llem_energy::DomainKind::Gpu)
    {
        for (ts, x) in s.t_s.iter().zip(col(s)) {
            if *ts >= start && *ts <= end && !x.is_nan() {
                v.push(f64::from(*x));
            }
        }
    }
    (stats::mean(&v), v.len())
}

pub(super) fn max_in_window(
    t: &Telemetry,
    start: f64,
    end: f64,
    col: fn(&llem_energy::telemetry::Series) -> &Vec<f32>,
) -> Option<f64> {
    t.series
        .iter()
        .filter(|s| s.domain.kind == llem_energy::DomainKind::Gpu)
        .flat_map(|s| s.t_s.iter().zip(col(s)))
        .filter(|(ts, x)| **ts >= start && **ts <= end && !x.is_nan())
        .map(|(_, x)| f64::from(*x))
        .reduce(f64::max)
}
