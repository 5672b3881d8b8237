//! The prose of a result: reproducibility notes, and the precision factor of the token
//! efficiency index.

use super::Measured;

/// Weight precision relative to 16-bit for the token efficiency index (the Python llem's
/// convention: 1.0 for FP16/FP32, 0.5 for INT8; 4-6 bit quantisations 0.25).
pub(super) fn precision_factor(dtype: Option<&str>) -> f64 {
    match dtype.map(str::to_ascii_uppercase).as_deref() {
        None => 1.0,
        Some(d) if d.starts_with('F') || d.starts_with("BF") => 1.0,
        Some(d) if d.starts_with("Q8") || d.starts_with("I8") || d.contains("8BIT") => 0.5,
        Some(_) => 0.25,
    }
}

pub(super) fn reproducibility_notes(m: &Measured<'_>, sampler: &str, interval_ms: f64) -> String {
    let mut n = format!(
        "Energy from the `{sampler}` sampler every {interval_ms:.0} ms over {}. ",
        if m.sensors.is_empty() {
            "no sensors".to_string()
        } else {
            m.sensors.join(", ")
        }
    );
    let asked_ms = m.telemetry.stats.requested_interval_s * 1000.0;
    if asked_ms > 0.0 && interval_ms > asked_ms * 1.001 {
        n.push_str(&format!(
            "The sampler ticked every {interval_ms:.0} ms, not the {asked_ms:.0} ms asked: no \
             sensor present changes faster (the CPU estimate reads /proc/stat every 100 ms, a \
             BMC is polled). "
        ));
    }
    n.push_str(match m.placement {
        llem_engines::placement::Placement::Cpu => {
            "The headline energy (total_energy_j) is the CPU's, packages plus DRAM: the \
             engine ran on the CPU. system_energy_j adds every other measured domain. "
        }
        llem_engines::placement::Placement::Gpus(_) => {
            "The headline energy (total_energy_j) is that of the GPUs the engine ran on; \
             host CPU and DRAM energy are in energy_breakdown and system_energy_j, never in \
             the headline. "
        }
    });
    n.push_str(
        "NVML board energy counters are accurate to about +/-5 % (+/-30 W power readings on \
         older boards); RAPL package/DRAM counters are model-based estimates by the CPU; the \
         `estimate` sensor is TDP x utilisation, a model, not a measurement. ",
    );
    n.push_str(if m.engine.name == "transformers" {
        if m.summary.latency_mode == Some("true_streaming") {
            "Latency comes from a generate() streamer in the transformers worker timing every \
             token on CLOCK_MONOTONIC, placed on the experiment clock (one request per batch). "
        } else {
            "The transformers worker timed each generate() batch as a whole (after a device \
             sync): every request of a batch ends with it, so there are no TTFT or ITL \
             figures (set measurement.latency_profiling for them). "
        }
    } else if m.served {
        "Latency is measured by llem's streaming client on the experiment clock: TTFT at the \
         first chunk carrying a token, token times split evenly over the gap when a chunk \
         carries several (latency_stats.measurement_mode says which). "
    } else {
        "Latency uses true per-token timestamps of the embedded engine (one clock for the \
         whole experiment). "
    });
    n.push_str(
        "FLOPs are analytical estimates, not hardware counts. Results \
         vary with thermal state, clocks and background load; compare runs by \
         mj_per_tok_adjusted over several cycles.",
    );
    n
}
