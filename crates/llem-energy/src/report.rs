//! The summary of one measured window: energy per domain, source, baseline, throttling,
//! carbon, warnings — what `llem measure` prints and writes to `measurement.json`.

use serde::Serialize;

use crate::baseline::{BaselineOutcome, adjusted_energy_j};
use crate::telemetry::{DomainEnergy, Telemetry};
use crate::throttle::{Throttle, throttling};

/// Grid carbon intensity and data-centre overhead.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CarbonFactors {
    /// gCO2 per kWh.
    pub intensity_gco2_kwh: f64,
    /// Power usage effectiveness (1.0 = none).
    pub pue: f64,
}

/// CO2 of `energy_j` in grams: kWh x intensity x PUE.
pub fn co2_g(energy_j: f64, f: CarbonFactors) -> f64 {
    energy_j / 3.6e6 * f.intensity_gco2_kwh * f.pue
}

/// One measured window, summarised.
#[derive(Clone, Debug, Serialize)]
pub struct EnergyReport {
    /// Window length, s.
    pub duration_s: f64,
    /// Energy over all domains, J.
    pub total_energy_j: f64,
    /// The weakest source among the domains: `counter`, `integrated` or `estimate`.
    pub energy_source: Option<&'static str>,
    /// The energy sampler.
    pub sampler: String,
    /// Sampling interval, ms.
    pub interval_ms: f64,
    /// Samples in the window (fewest over the domains).
    pub n_samples: usize,
    /// Per domain.
    pub domains: Vec<DomainEnergy>,
    /// Idle power, W, when a baseline was taken.
    pub baseline_power_w: Option<f64>,
    /// How the baseline was obtained.
    pub baseline: Option<BaselineOutcome>,
    /// `max(0, total - baseline x duration)`, J.
    pub energy_adjusted_j: Option<f64>,
    /// Throttling per GPU.
    pub throttle: Vec<Throttle>,
    /// The carbon factors used.
    pub carbon: Option<CarbonFactors>,
    /// CO2 of the total energy, g.
    pub co2_g: Option<f64>,
    /// What weakens the measurement.
    pub warnings: Vec<String>,
}

/// Summarises `[start_s, end_s]` of a recording.
pub fn report(
    t: &Telemetry,
    start_s: f64,
    end_s: f64,
    sampler: &str,
    baseline: Option<BaselineOutcome>,
    carbon: Option<CarbonFactors>,
) -> EnergyReport {
    let w = t.energy(start_s, end_s);
    let throttle = throttling(t, start_s, end_s);
    let warnings = crate::quality::warnings(t, &w, &throttle);
    let baseline_power_w = baseline.as_ref().map(|b| b.record.total_power_w);
    EnergyReport {
        duration_s: w.duration_s(),
        total_energy_j: w.total_j,
        energy_source: w.energy_source.map(|s| s.as_str()),
        sampler: sampler.to_string(),
        interval_ms: t.stats.interval_s * 1000.0,
        n_samples: w.domains.iter().map(|d| d.n_samples).min().unwrap_or(0),
        energy_adjusted_j: baseline_power_w
            .map(|b| adjusted_energy_j(w.total_j, b, w.duration_s())),
        baseline_power_w,
        baseline,
        throttle,
        co2_g: carbon.map(|c| co2_g(w.total_j, c)),
        carbon,
        domains: w.domains,
        warnings,
    }
}
