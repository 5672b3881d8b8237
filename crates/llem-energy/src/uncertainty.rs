//! How sure an energy figure is: what bounds each domain's energy over a window, and the
//! bound of their sum.
//!
//! Three things limit a window's energy, each given per domain:
//! - **resolution at the edges**: a counter moves once per update period (measured before
//!   sampling, [`crate::update_period`]), so each window edge is uncertain by up to one
//!   period of energy: period x power at the edge; a power-only sensor, by one sampling
//!   interval of power;
//! - **coverage**: the share of the window with a fresh reading; a gap longer than two
//!   sampling intervals is bridged by interpolation and bounded by its length x the
//!   domain's peak power;
//! - **the sensor's own accuracy**, where its maker documents one: NVML's power and energy
//!   readings are accurate to +/- 5 % of the draw (NVML API reference); RAPL and amdgpu hwmon
//!   have no documented figure (the bound then leaves it out and says so); an estimate is
//!   not a measurement and has no bound at all.
//!
//! The bound of a figure is their sum over the domains: a worst case, not a standard error.

use llem_results::result::{DomainUncertaintyRecord, EnergyUncertainty};

use crate::sensor::SensorKind;
use crate::telemetry::{DomainEnergy, Series, Telemetry};

/// The documented relative accuracy of a sensor family, if any.
pub fn documented_accuracy(kind: SensorKind) -> Option<f64> {
    match kind {
        SensorKind::Nvml => Some(0.05),
        SensorKind::Amdgpu
        | SensorKind::Rapl
        | SensorKind::Estimate
        | SensorKind::Hwmon
        | SensorKind::Ipmi
        | SensorKind::Redfish => None,
    }
}

/// Power of `s` near `t`: the sampled power, else the slope of the counter's `updates`
/// around `t`.
fn power_near(s: &Series, updates: &[(f64, f64)], t: f64, fallback_w: f64) -> f64 {
    let i = s.t_s.partition_point(|x| *x < t);
    let near = [i.checked_sub(1), Some(i)];
    if s.has_power {
        let p = near
            .iter()
            .flatten()
            .filter_map(|&k| s.power_w.get(k).copied())
            .filter(|p| p.is_finite())
            .reduce(f64::max);
        if let Some(p) = p {
            return p;
        }
    }
    let k = updates
        .partition_point(|p| p.0 < t)
        .clamp(1, updates.len().saturating_sub(1).max(1));
    match (updates.get(k.wrapping_sub(1)), updates.get(k)) {
        (Some(a), Some(b)) if b.0 > a.0 => (b.1 - a.1) / (b.0 - a.0),
        _ => fallback_w,
    }
}

/// The bounds of the domains `energies` (a window's, from [`Telemetry::energy`]) over
/// `[t0, t1]`, as `result.json` holds them (`mj_per_tok` is left to the caller, who knows
/// the tokens).
pub fn of(
    telemetry: &Telemetry,
    energies: &[&DomainEnergy],
    t0: f64,
    t1: f64,
) -> EnergyUncertainty {
    let interval = telemetry.stats.interval_s;
    let duration = (t1 - t0).max(f64::MIN_POSITIVE);
    let mut domains = Vec::with_capacity(energies.len());
    let mut notes = Vec::new();
    for d in energies {
        let Some(s) = telemetry.series.iter().find(|s| s.domain.name == d.name) else {
            continue;
        };
        let resolution_s = s.update_period_s.unwrap_or(interval);
        // Once per domain, for both edges (it scans the whole recording).
        let updates = if s.has_counter {
            s.counter_updates()
        } else {
            Vec::new()
        };
        let near = |t: f64| power_near(s, &updates, t, d.avg_power_w);
        let edge_bound_j = resolution_s * (near(t0) + near(t1));
        // A polled node source reads once per its own period, not per tick: a gap is a
        // missed poll, not every poll.
        let read_every = if s.domain.kind == crate::sensor::DomainKind::Node {
            interval.max(resolution_s)
        } else {
            interval
        };
        // Readings inside the window, and the edges, as the points between which gaps run.
        let mut times: Vec<f64> = vec![t0];
        times.extend(s.t_s.iter().copied().filter(|t| *t > t0 && *t < t1));
        times.push(t1);
        let gaps: Vec<f64> = times
            .windows(2)
            .filter_map(|w| match w {
                [a, b] if b - a > 2.0 * read_every => Some(b - a),
                _ => None,
            })
            .collect();
        let uncovered: f64 = gaps.iter().sum();
        let longest_gap_s = times
            .windows(2)
            .map(|w| w.get(1).zip(w.first()).map_or(0.0, |(b, a)| b - a))
            .fold(0.0, f64::max);
        let gap_bound_j = uncovered * d.peak_power_w.unwrap_or(d.avg_power_w);
        let accuracy = documented_accuracy(s.sensor);
        let accuracy_bound_j = accuracy.map(|a| a * d.energy_j.abs());
        match s.sensor {
            SensorKind::Rapl
            | SensorKind::Amdgpu
            | SensorKind::Hwmon
            | SensorKind::Ipmi
            | SensorKind::Redfish => {
                let who = match s.sensor {
                    SensorKind::Rapl => "Intel RAPL",
                    SensorKind::Amdgpu => "amdgpu hwmon",
                    SensorKind::Hwmon => "the hwmon power meter",
                    SensorKind::Ipmi => "DCMI (the BMC's vendor may)",
                    _ => "Redfish (the BMC's vendor may)",
                };
                notes.push(format!(
                    "{}: {who} documents no accuracy for its readings; the bound holds \
                     resolution and coverage only",
                    d.name
                ));
            }
            // The quality warning says it is an estimate with no bound, and the domain's
            // record says so (sensor `estimate`, bound null): once is enough.
            SensorKind::Estimate | SensorKind::Nvml => {}
        }
        let bound_j = (s.sensor != SensorKind::Estimate)
            .then(|| edge_bound_j + gap_bound_j + accuracy_bound_j.unwrap_or(0.0));
        domains.push(DomainUncertaintyRecord {
            name: d.name.clone(),
            sensor: s.sensor.as_str().into(),
            update_period_s: s.update_period_s,
            resolution_s,
            edge_bound_j,
            coverage: (1.0 - uncovered / duration).clamp(0.0, 1.0),
            longest_gap_s,
            gap_bound_j,
            accuracy,
            accuracy_bound_j,
            disagreement: d.disagreement,
            bound_j,
        });
    }
    let bound_j: Option<f64> = if domains.is_empty() {
        None
    } else {
        domains.iter().map(|d| d.bound_j).sum()
    };
    let energy: f64 = energies.iter().map(|d| d.energy_j).sum();
    EnergyUncertainty {
        relative: bound_j.filter(|_| energy > 0.0).map(|b| b / energy),
        mj_per_tok: None,
        domains,
        bound_j,
        notes,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::sensor::{Domain, DomainKind, Reading};
    use crate::telemetry::SamplerStats;

    fn gpu(period_s: Option<f64>, skip: Option<(f64, f64)>) -> Telemetry {
        let mut s = Series::new(
            Domain {
                name: "gpu0".into(),
                kind: DomainKind::Gpu,
                index: 0,
                device: String::new(),
            },
            SensorKind::Nvml,
            true,
            true,
        );
        s.update_period_s = period_s;
        for i in 0..=1000 {
            let t = f64::from(i) * 0.01;
            if skip.is_some_and(|(a, b)| t > a && t < b) {
                continue;
            }
            s.push(
                t,
                &Reading {
                    energy_j: Some(200.0 * t),
                    power_w: Some(200.0),
                    ..Reading::default()
                },
            );
        }
        Telemetry {
            series: vec![s],
            stats: SamplerStats {
                interval_s: 0.01,
                ..SamplerStats::default()
            },
            start_s: 0.0,
            end_s: 10.0,
        }
    }

    #[test]
    fn an_nvml_window_is_bounded_by_its_edges_and_its_five_percent() {
        let t = gpu(Some(0.02), None);
        let w = t.energy(1.0, 9.0);
        let d: Vec<&DomainEnergy> = w.domains.iter().collect();
        let u = of(&t, &d, 1.0, 9.0);
        let g = &u.domains[0];
        // 20 ms of 200 W at each edge; 5 % of 1600 J.
        assert!((g.edge_bound_j - 8.0).abs() < 1e-9, "{}", g.edge_bound_j);
        assert!((g.accuracy_bound_j.unwrap() - 80.0).abs() < 1e-6);
        assert_eq!(g.coverage, 1.0);
        assert!((u.bound_j.unwrap() - 88.0).abs() < 1e-6);
        assert!((u.relative.unwrap() - 0.055).abs() < 1e-6);
        assert!(u.notes.is_empty());
    }

    #[test]
    fn a_gap_lowers_coverage_and_widens_the_bound() {
        let t = gpu(Some(0.02), Some((4.0, 5.0)));
        let w = t.energy(1.0, 9.0);
        let d: Vec<&DomainEnergy> = w.domains.iter().collect();
        let u = of(&t, &d, 1.0, 9.0);
        let g = &u.domains[0];
        assert!(
            (g.coverage - (1.0 - 1.0 / 8.0)).abs() < 0.01,
            "{}",
            g.coverage
        );
        assert!(g.longest_gap_s > 0.99);
        assert!((g.gap_bound_j - 200.0).abs() < 3.0, "{}", g.gap_bound_j);
    }
}
