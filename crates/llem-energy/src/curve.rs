//! Cumulative energy of chosen domains as a function of time: the one curve from which a
//! window's energy can be cut into any number of intervals whose parts add up exactly.
//!
//! A counter domain is read at its updates (the reads where its value changed) and
//! interpolated linearly between them, so a counter that updates every 100 ms read every
//! 10 ms is not taken as a staircase; a power domain is integrated exactly as the
//! piecewise-linear power its samples describe. Each domain uses the source
//! [`crate::Telemetry::energy`] uses for it, so the curve's rise over a window is that
//! window's energy.

use crate::sensor::EnergySource;
use crate::telemetry::{Series, Telemetry};

/// One domain's cumulative energy.
#[derive(Clone, Debug)]
enum DomainCurve {
    /// `(t, cumulative J)` at the counter's updates.
    Counter(Vec<(f64, f64)>),
    /// Power samples `(t, W)` and the energy integrated up to each, J.
    Power(Vec<(f64, f64)>, Vec<f64>),
}

impl DomainCurve {
    fn of(s: &Series) -> Option<DomainCurve> {
        let counter = s.counter_updates();
        let power = s.power_points();
        let use_counter = match s.source()? {
            EnergySource::Counter => counter.len() >= 2 || power.len() < 2,
            _ => power.len() < 2,
        };
        if use_counter {
            return (!counter.is_empty()).then_some(DomainCurve::Counter(counter));
        }
        let mut cum = Vec::with_capacity(power.len());
        let mut acc = 0.0;
        cum.push(0.0);
        for w in power.windows(2) {
            if let [(t0, p0), (t1, p1)] = w {
                acc += (t1 - t0) * (p0 + p1) / 2.0;
            }
            cum.push(acc);
        }
        Some(DomainCurve::Power(power, cum))
    }

    fn at(&self, t: f64) -> f64 {
        match self {
            DomainCurve::Counter(pts) => shaped(pts, t),
            DomainCurve::Power(pts, cum) => {
                let (Some(first), Some(last)) = (pts.first(), cum.last()) else {
                    return 0.0;
                };
                if t <= first.0 {
                    return 0.0;
                }
                let i = pts.partition_point(|p| p.0 <= t);
                match (
                    pts.get(i.wrapping_sub(1)),
                    pts.get(i),
                    cum.get(i.wrapping_sub(1)),
                ) {
                    (Some(&(t0, p0)), Some(&(t1, p1)), Some(&c0)) if t1 > t0 => {
                        // Exact integral of the linear power from t0 to t.
                        let dt = t - t0;
                        c0 + p0 * dt + (p1 - p0) * dt * dt / (2.0 * (t1 - t0))
                    }
                    (_, None, _) => *last,
                    (_, _, Some(&c0)) => c0,
                    _ => 0.0,
                }
            }
        }
    }
}

/// Linear interpolation of `(t, v)` points at `x`, held at the first/last point outside.
fn interpolate(pts: &[(f64, f64)], x: f64) -> f64 {
    let (Some(first), Some(last)) = (pts.first(), pts.last()) else {
        return 0.0;
    };
    if x <= first.0 {
        return first.1;
    }
    if x >= last.0 {
        return last.1;
    }
    let i = pts.partition_point(|p| p.0 <= x);
    match (pts.get(i.wrapping_sub(1)), pts.get(i)) {
        (Some(&(t0, v0)), Some(&(t1, v1))) if t1 > t0 => v0 + (v1 - v0) * (x - t0) / (t1 - t0),
        (Some(&(_, v0)), _) => v0,
        _ => last.1,
    }
}

/// The counter at `x` between two updates, shaped by the power on either side: the energy
/// between the updates is split in proportion to the power before (the slope of the
/// interval ending at the first update) times the time on that side, and the power after
/// times the time on the other. Where power steps at `x` (a prefill pass ends and decode
/// starts), this places the step where it happened instead of spreading it over the whole
/// interval as a straight line would, which biases short passes by up to a quarter of the
/// read interval times the step. With the same power on both sides it is the straight line.
fn shaped(pts: &[(f64, f64)], x: f64) -> f64 {
    let i = pts.partition_point(|p| p.0 <= x);
    let (Some(&(t0, v0)), Some(&(t1, v1))) = (pts.get(i.wrapping_sub(1)), pts.get(i)) else {
        return interpolate(pts, x);
    };
    let slope = |a: Option<&(f64, f64)>, b: Option<&(f64, f64)>| match (a, b) {
        (Some(a), Some(b)) if b.0 > a.0 => Some((b.1 - a.1) / (b.0 - a.0)),
        _ => None,
    };
    let before = slope(pts.get(i.wrapping_sub(2)), pts.get(i.wrapping_sub(1)));
    let after = slope(pts.get(i), pts.get(i + 1));
    match (before, after) {
        (Some(pa), Some(pb)) if pa > 0.0 && pb > 0.0 && t1 > t0 && v1 >= v0 => {
            let (wa, wb) = (pa * (x - t0), pb * (t1 - x));
            v0 + (v1 - v0) * wa / (wa + wb)
        }
        _ => interpolate(pts, x),
    }
}

/// The summed cumulative energy of some domains of a recording.
#[derive(Clone, Debug)]
pub struct EnergyCurve {
    domains: Vec<DomainCurve>,
}

impl EnergyCurve {
    /// The curve of the domains named in `names`; `None` when one of them has no usable
    /// readings (its part of any interval would be unknown).
    pub fn of(telemetry: &Telemetry, names: &[String]) -> Option<EnergyCurve> {
        let mut domains = Vec::with_capacity(names.len());
        for name in names {
            let s = telemetry.series.iter().find(|s| &s.domain.name == name)?;
            domains.push(DomainCurve::of(s)?);
        }
        (!domains.is_empty()).then_some(EnergyCurve { domains })
    }

    /// Energy from the curve's origin to `t_s`, J (origins differ per domain; only
    /// differences mean anything).
    pub fn at(&self, t_s: f64) -> f64 {
        self.domains.iter().map(|d| d.at(t_s)).sum()
    }

    /// Energy over `[a_s, b_s]`, J.
    pub fn between(&self, a_s: f64, b_s: f64) -> f64 {
        self.at(b_s) - self.at(a_s)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::float_cmp)]
mod tests {
    use super::*;
    use crate::sensor::{Domain, DomainKind, Reading, SensorKind};

    fn domain(name: &str) -> Domain {
        Domain {
            name: name.into(),
            kind: DomainKind::CpuPackage,
            index: 0,
            device: String::new(),
        }
    }

    #[test]
    fn a_slow_counter_is_interpolated_between_its_updates() {
        // 10 W, counter updated every 100 ms, read every 10 ms.
        let mut s = Series::new(domain("package-0"), SensorKind::Rapl, true, false);
        for i in 0..=100 {
            let t = f64::from(i) * 0.01;
            let updated = (t / 0.1 + 1e-9).floor() * 0.1;
            s.push(
                t,
                &Reading {
                    energy_j: Some(10.0 * updated),
                    ..Reading::default()
                },
            );
        }
        let tel = Telemetry {
            series: vec![s],
            start_s: 0.0,
            end_s: 1.0,
            ..Telemetry::default()
        };
        let c = EnergyCurve::of(&tel, &["package-0".into()]).unwrap();
        // Between updates the curve rises at 10 W, not in 1 J steps.
        assert!(
            (c.between(0.32, 0.37) - 0.5).abs() < 1e-9,
            "{}",
            c.between(0.32, 0.37)
        );
        assert!((c.between(0.0, 1.0) - 10.0).abs() < 1e-9);
        let w = tel.energy(0.32, 0.37);
        assert!(
            (w.total_j - c.between(0.32, 0.37)).abs() < 1e-12,
            "one source of truth"
        );
    }

    #[test]
    fn power_is_integrated_exactly_inside_a_segment() {
        let mut s = Series::new(domain("gpu0"), SensorKind::Nvml, false, true);
        for (t, p) in [(0.0, 0.0), (1.0, 10.0), (2.0, 10.0)] {
            s.push(
                t,
                &Reading {
                    power_w: Some(p),
                    ..Reading::default()
                },
            );
        }
        let tel = Telemetry {
            series: vec![s],
            start_s: 0.0,
            end_s: 2.0,
            ..Telemetry::default()
        };
        let c = EnergyCurve::of(&tel, &["gpu0".into()]).unwrap();
        // A ramp 0 -> 10 W over 1 s: 1.25 J in its first half, 3.75 J in its second.
        assert!((c.between(0.0, 0.5) - 1.25).abs() < 1e-12);
        assert!((c.between(0.5, 1.0) - 3.75).abs() < 1e-12);
        assert!((c.between(0.0, 2.0) - 15.0).abs() < 1e-12);
        let w = tel.energy(0.25, 1.5);
        assert!((w.total_j - c.between(0.25, 1.5)).abs() < 1e-12);
        assert!(EnergyCurve::of(&tel, &["gpu1".into()]).is_none());
    }
}
