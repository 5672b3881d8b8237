//! The samples of one recording, kept compactly (one column per field, NaN for missing), and
//! the energy of any time window computed from them.

use serde::Serialize;

use crate::sensor::{Domain, DomainKind, EnergySource, Reading, SensorKind};

/// Relative disagreement between counter and integrated power above which a window warns.
pub const DISAGREEMENT_WARN: f64 = 0.05;

/// How far a domain's readings may stop short of a window's edge, in sampling intervals
/// (at least [`MIN_COVERAGE_GAP_S`]), before its energy for the window is unknown: past
/// that a GPU fell off the bus or a sensor stopped answering, and holding its last reading
/// would count part of the window as the whole.
const COVERAGE_INTERVALS: f64 = 5.0;
/// The smallest such allowance, s.
const MIN_COVERAGE_GAP_S: f64 = 0.5;

/// No throttle reasons recorded for a sample.
const NO_THROTTLE: u64 = u64::MAX;

fn opt(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

fn nan(v: Option<f64>) -> f64 {
    v.unwrap_or(f64::NAN)
}

fn nan32(v: Option<f64>) -> f32 {
    v.map_or(f32::NAN, |x| x as f32)
}

/// All samples of one domain.
#[derive(Clone, Debug)]
pub struct Series {
    /// The domain.
    pub domain: Domain,
    /// Sensor family.
    pub sensor: SensorKind,
    /// Whether the sensor has an energy counter.
    pub has_counter: bool,
    /// Whether the sensor reports power.
    pub has_power: bool,
    /// Sample times, seconds since the recording's epoch.
    pub t_s: Vec<f64>,
    /// Cumulative energy, J (NaN: not read).
    pub energy_j: Vec<f64>,
    /// Power, W (NaN: not read): instantaneous where the device reports it.
    pub power_w: Vec<f64>,
    /// The device's 1-s average power, W (NaN: not reported).
    pub power_avg_w: Vec<f64>,
    /// Temperature, °C.
    pub temperature_c: Vec<f32>,
    /// Memory used, MiB.
    pub memory_used_mib: Vec<f32>,
    /// Memory total, MiB.
    pub memory_total_mib: Vec<f32>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Vec<f32>,
    /// SM utilisation, %.
    pub sm_util_pct: Vec<f32>,
    /// Memory utilisation, %.
    pub mem_util_pct: Vec<f32>,
    throttle: Vec<u64>,
    /// Reads that failed.
    pub errors: u32,
    /// The first read error, for the report.
    pub first_error: Option<String>,
    /// Setup notes from the sensor (persistence mode off, ...).
    pub notes: Vec<String>,
    /// How often the counter moves, s, measured before sampling; null when unmeasured.
    pub update_period_s: Option<f64>,
}

impl Series {
    /// An empty series for a domain.
    pub fn new(domain: Domain, sensor: SensorKind, has_counter: bool, has_power: bool) -> Self {
        Series {
            domain,
            sensor,
            has_counter,
            has_power,
            t_s: Vec::new(),
            energy_j: Vec::new(),
            power_w: Vec::new(),
            power_avg_w: Vec::new(),
            temperature_c: Vec::new(),
            memory_used_mib: Vec::new(),
            memory_total_mib: Vec::new(),
            sm_clock_mhz: Vec::new(),
            sm_util_pct: Vec::new(),
            mem_util_pct: Vec::new(),
            throttle: Vec::new(),
            errors: 0,
            first_error: None,
            notes: Vec::new(),
            update_period_s: None,
        }
    }

    /// Appends a reading taken at `t_s`.
    pub fn push(&mut self, t_s: f64, r: &Reading) {
        self.t_s.push(t_s);
        self.energy_j.push(nan(r.energy_j));
        self.power_w.push(nan(r.power_w));
        self.power_avg_w.push(nan(r.power_avg_w));
        self.temperature_c.push(nan32(r.temperature_c));
        self.memory_used_mib.push(nan32(r.memory_used_mib));
        self.memory_total_mib.push(nan32(r.memory_total_mib));
        self.sm_clock_mhz.push(nan32(r.sm_clock_mhz));
        self.sm_util_pct.push(nan32(r.sm_util_pct));
        self.mem_util_pct.push(nan32(r.mem_util_pct));
        self.throttle
            .push(r.throttle_reasons.unwrap_or(NO_THROTTLE));
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.t_s.len()
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.t_s.is_empty()
    }

    /// Throttle reasons of sample `i`.
    pub fn throttle_reasons(&self, i: usize) -> Option<u64> {
        self.throttle.get(i).copied().filter(|&t| t != NO_THROTTLE)
    }

    /// The energy source this series supports: counter, else integrated power; estimate
    /// sensors are always `estimate`.
    pub fn source(&self) -> Option<EnergySource> {
        if self.sensor == SensorKind::Estimate {
            return Some(EnergySource::Estimate);
        }
        if self.has_counter {
            Some(EnergySource::Counter)
        } else if self.has_power {
            Some(EnergySource::Integrated)
        } else {
            None
        }
    }

    fn points(&self, values: &[f64]) -> Vec<(f64, f64)> {
        self.t_s
            .iter()
            .zip(values)
            .filter(|(_, v)| v.is_finite())
            .map(|(t, v)| (*t, *v))
            .collect()
    }

    /// The counter at its updates: the first reading and every one whose value changed. A
    /// counter updated every 100 ms and read every 10 ms repeats itself nine times between
    /// updates; interpolating over the repeats would draw a staircase.
    ///
    /// An update happened somewhere between the read that saw it and the one before; it is
    /// placed where it happened on average. With the counter's period measured
    /// ([`Self::update_period_s`]) that is half a period before the read (half the read
    /// interval when the counter is the slower); unmeasured, a counter that most reads
    /// repeat is taken as slower than the reads (halfway), one that changes at nearly every
    /// read as updating at the read (RAPL, ~1 ms; a stalled read or two does not make it
    /// slow). Placing every update at its read would shift the curve late.
    pub fn counter_updates(&self) -> Vec<(f64, f64)> {
        let pts = self.points(&self.energy_j);
        let repeats = pts
            .windows(2)
            .filter(|w| matches!(w, [a, b] if a.1 == b.1))
            .count();
        let slow = repeats * 2 >= pts.len().saturating_sub(1).max(1);
        // How far before the read that saw it an update happened, on average: half the
        // counter's period when it was measured (and shorter than the reads), half the read
        // interval when the counter is slower than the reads, else nothing.
        // A polled node counter is stamped when it was read (its age taken off): no lag.
        let polled = self.domain.kind == DomainKind::Node;
        let lag = |since_prev: f64| match self.update_period_s {
            _ if polled => 0.0,
            Some(u) => u.min(since_prev) / 2.0,
            None if slow => since_prev / 2.0,
            None => 0.0,
        };
        let mut out: Vec<(f64, f64)> = Vec::with_capacity(pts.len());
        let mut prev: Option<(f64, f64)> = None;
        for &(t, v) in &pts {
            match prev {
                None => out.push((t, v)),
                Some((tp, vp)) if v != vp => out.push((t - lag(t - tp), v)),
                Some(_) => {}
            }
            prev = Some((t, v));
        }
        out
    }

    /// The power readings, `(t, W)`.
    pub fn power_points(&self) -> Vec<(f64, f64)> {
        self.points(&self.power_w)
    }

    /// Energy of `[start, end]` from the counter, interpolated between its updates.
    pub fn counter_energy(&self, start: f64, end: f64) -> Option<f64> {
        let pts = self.counter_updates();
        Some(interpolate(&pts, end)? - interpolate(&pts, start)?)
    }

    /// Energy of `[start, end]` by trapezoid integration of power.
    pub fn integrated_energy(&self, start: f64, end: f64) -> Option<f64> {
        integrate(&self.power_points(), start, end)
    }

    /// Cumulative energy at every sample, from the counter or by integrating power, zero at
    /// the first sample; NaN where neither exists.
    pub fn cumulative_energy(&self) -> Vec<f64> {
        let mut out = vec![f64::NAN; self.len()];
        if self.has_counter {
            let base = self.energy_j.iter().copied().find(|v| v.is_finite());
            if let Some(b) = base {
                for (o, e) in out.iter_mut().zip(&self.energy_j) {
                    *o = e - b;
                }
            }
        } else if self.has_power {
            let mut acc = 0.0;
            let mut prev: Option<(f64, f64)> = None;
            for ((o, t), p) in out.iter_mut().zip(&self.t_s).zip(&self.power_w) {
                if !p.is_finite() {
                    continue;
                }
                if let Some((t0, p0)) = prev {
                    acc += (t - t0) * (p + p0) / 2.0;
                }
                prev = Some((*t, *p));
                *o = acc;
            }
        }
        out
    }

    /// Highest power within `[start, end]`: sampled power, or counter differences when the
    /// sensor reports no power.
    pub fn peak_power(&self, start: f64, end: f64) -> Option<f64> {
        let inside = |t: &f64| *t >= start && *t <= end;
        if self.has_power {
            return self
                .t_s
                .iter()
                .zip(&self.power_w)
                .filter(|(t, p)| inside(t) && p.is_finite())
                .map(|(_, p)| *p)
                .reduce(f64::max);
        }
        self.points(&self.energy_j)
            .windows(2)
            .filter_map(|w| match w {
                [(t0, e0), (t1, e1)] if inside(t0) && inside(t1) && t1 > t0 => {
                    Some((e1 - e0) / (t1 - t0))
                }
                _ => None,
            })
            .reduce(f64::max)
    }

    /// First and last time with a usable reading (energy or power), s.
    fn read_span(&self) -> Option<(f64, f64)> {
        let usable = |i: &usize| {
            self.energy_j.get(*i).is_some_and(|v| v.is_finite())
                || self.power_w.get(*i).is_some_and(|v| v.is_finite())
        };
        let first = (0..self.len()).find(usable)?;
        let last = (0..self.len()).rev().find(usable)?;
        Some((*self.t_s.get(first)?, *self.t_s.get(last)?))
    }

    /// Readings (energy or power) within `[start, end]`; a tick that brought nothing new
    /// from a polled source is not one.
    pub fn samples_in(&self, start: f64, end: f64) -> usize {
        (0..self.len())
            .filter(|&i| {
                self.t_s.get(i).is_some_and(|t| *t >= start && *t <= end)
                    && (self.energy_j.get(i).is_some_and(|v| v.is_finite())
                        || self.power_w.get(i).is_some_and(|v| v.is_finite()))
            })
            .count()
    }
}

/// Linear interpolation of `(t, v)` points at `x`, clamped to the first/last point.
fn interpolate(pts: &[(f64, f64)], x: f64) -> Option<f64> {
    let (first, last) = (pts.first()?, pts.last()?);
    if x <= first.0 {
        return Some(first.1);
    }
    if x >= last.0 {
        return Some(last.1);
    }
    let i = pts.partition_point(|p| p.0 <= x);
    match (pts.get(i.checked_sub(1)?), pts.get(i)) {
        (Some(&(t0, v0)), Some(&(t1, v1))) if t1 > t0 => {
            Some(v0 + (v1 - v0) * (x - t0) / (t1 - t0))
        }
        (Some(&(_, v0)), _) => Some(v0),
        _ => None,
    }
}

/// Trapezoid integral of piecewise-linear `(t, v)` over `[a, b]`, segments clipped at the
/// window edges.
fn integrate(pts: &[(f64, f64)], a: f64, b: f64) -> Option<f64> {
    if pts.len() < 2 || b <= a {
        return (pts.len() >= 2).then_some(0.0);
    }
    let mut total = 0.0;
    for w in pts.windows(2) {
        let [(t0, v0), (t1, v1)] = w else { continue };
        let (lo, hi) = (t0.max(a), t1.min(b));
        if hi <= lo || t1 <= t0 {
            continue;
        }
        let at = |x: f64| v0 + (v1 - v0) * (x - t0) / (t1 - t0);
        total += (hi - lo) * (at(lo) + at(hi)) / 2.0;
    }
    Some(total)
}

/// Statistics of the recording itself.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SamplerStats {
    /// Interval ticked at, s: the requested one, or the pace of the fastest sensor when
    /// every sensor changes more slowly (the CPU estimate, a polled BMC).
    pub interval_s: f64,
    /// Interval asked for, s.
    pub requested_interval_s: f64,
    /// Ticks taken.
    pub ticks: u64,
    /// Ticks that started later than one interval after their deadline.
    pub late_ticks: u64,
    /// Largest time between two ticks, s.
    pub max_gap_s: f64,
    /// Ticks with a gap above twice the interval.
    pub long_gaps: u64,
    /// CPU time of the sampler thread over the recording, s.
    pub thread_cpu_s: Option<f64>,
}

/// Everything one recording captured.
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    /// One series per domain.
    pub series: Vec<Series>,
    /// Sampler statistics.
    pub stats: SamplerStats,
    /// Time of the first sample, s since the epoch.
    pub start_s: f64,
    /// Time of the last sample, s since the epoch.
    pub end_s: f64,
}

/// Energy of one domain over a window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DomainEnergy {
    /// Domain name.
    pub name: String,
    /// Device kind.
    pub kind: DomainKind,
    /// Device index.
    pub device_index: u32,
    /// Sensor family.
    pub sensor: SensorKind,
    /// Energy, J, from the best source.
    pub energy_j: f64,
    /// Which source `energy_j` comes from.
    pub energy_source: EnergySource,
    /// Counter energy, when the sensor has a counter.
    pub counter_j: Option<f64>,
    /// Integrated power, when the sensor reports power.
    pub integrated_j: Option<f64>,
    /// |counter - integrated| / counter, when both exist.
    pub disagreement: Option<f64>,
    /// Energy / duration, W.
    pub avg_power_w: f64,
    /// Highest sampled power, W.
    pub peak_power_w: Option<f64>,
    /// Samples in the window.
    pub n_samples: usize,
}

/// Energy of all domains over a window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowEnergy {
    /// Window start, s since the epoch.
    pub start_s: f64,
    /// Window end, s since the epoch.
    pub end_s: f64,
    /// Per domain.
    pub domains: Vec<DomainEnergy>,
    /// Sum over domains, J.
    pub total_j: f64,
    /// The whole node (a BMC or power meter), which encloses `domains`: never in `total_j`.
    pub node: Vec<DomainEnergy>,
    /// The weakest source among the domains (null when there are none).
    pub energy_source: Option<EnergySource>,
    /// Counter/power disagreements and coverage problems.
    pub warnings: Vec<String>,
}

impl WindowEnergy {
    /// Window length, s.
    pub fn duration_s(&self) -> f64 {
        self.end_s - self.start_s
    }
}

impl Telemetry {
    /// Energy of every domain over `[start_s, end_s]` (seconds since the epoch).
    pub fn energy(&self, start_s: f64, end_s: f64) -> WindowEnergy {
        let duration = (end_s - start_s).max(0.0);
        let mut warnings = Vec::new();
        if start_s < self.start_s - 1e-9 || end_s > self.end_s + 1e-9 {
            warnings.push(format!(
                "window [{start_s:.3}, {end_s:.3}] s extends beyond the samples [{:.3}, {:.3}] s; \
                 the edges are held at the nearest sample",
                self.start_s, self.end_s
            ));
        }
        let mut domains = Vec::new();
        let mut node = Vec::new();
        let allowance = (COVERAGE_INTERVALS * self.stats.interval_s).max(MIN_COVERAGE_GAP_S);
        // The edges the recording can cover at all; beyond it every domain is held alike.
        let (from, to) = (start_s.max(self.start_s), end_s.min(self.end_s));
        for s in &self.series {
            let Some(source) = s.source() else { continue };
            // A polled node source reads once per its period: allow a few of those.
            let allowance = if s.domain.kind == DomainKind::Node {
                allowance.max(2.5 * s.update_period_s.unwrap_or(0.0))
            } else {
                allowance
            };
            if let Some((first, last)) = s.read_span()
                && (last < to - allowance || first > from + allowance)
            {
                let (a, b) = if last < to - allowance {
                    (last, to)
                } else {
                    (from, first)
                };
                warnings.push(format!(
                    "{}: no readings from {a:.1} s to {b:.1} s ({}); its energy for the window \
                     is unknown",
                    s.domain.name,
                    s.first_error
                        .as_deref()
                        .unwrap_or("the sensor stopped answering")
                ));
                continue;
            }
            let counter_j = s
                .has_counter
                .then(|| s.counter_energy(start_s, end_s))
                .flatten();
            let integrated_j = s
                .has_power
                .then(|| s.integrated_energy(start_s, end_s))
                .flatten();
            let (energy_j, energy_source) = match (counter_j, integrated_j) {
                (Some(c), _) if source == EnergySource::Counter => (c, EnergySource::Counter),
                (_, Some(i)) => (i, source.min(EnergySource::Integrated)),
                (Some(c), None) => (c, source),
                (None, None) => {
                    warnings.push(format!("{}: no samples in the window", s.domain.name));
                    continue;
                }
            };
            let disagreement = match (counter_j, integrated_j) {
                (Some(c), Some(i)) if c.abs() > 1e-9 => Some((c - i).abs() / c.abs()),
                _ => None,
            };
            if let (Some(d), Some(c), Some(i)) = (disagreement, counter_j, integrated_j)
                && d > DISAGREEMENT_WARN
            {
                warnings.push(format!(
                    "{}: energy counter and integrated power disagree by {:.1} % \
                         (counter {c:.2} J, power {i:.2} J)",
                    s.domain.name,
                    d * 100.0
                ));
            }
            let into = if s.domain.kind == DomainKind::Node {
                &mut node
            } else {
                &mut domains
            };
            into.push(DomainEnergy {
                name: s.domain.name.clone(),
                kind: s.domain.kind,
                device_index: s.domain.index,
                sensor: s.sensor,
                energy_j,
                energy_source,
                counter_j,
                integrated_j,
                disagreement,
                avg_power_w: if duration > 0.0 {
                    energy_j / duration
                } else {
                    0.0
                },
                peak_power_w: s.peak_power(start_s, end_s),
                n_samples: s.samples_in(start_s, end_s),
            });
        }
        WindowEnergy {
            start_s,
            end_s,
            total_j: domains.iter().map(|d| d.energy_j).sum(),
            energy_source: domains.iter().map(|d| d.energy_source).min(),
            domains,
            node,
            warnings,
        }
    }

    /// Energy over the whole recording.
    pub fn total_energy(&self) -> WindowEnergy {
        self.energy(self.start_s, self.end_s)
    }

    /// Samples per domain (the smallest count, which bounds the resolution).
    pub fn n_samples(&self) -> usize {
        self.series.iter().map(Series::len).min().unwrap_or(0)
    }

    /// The recording as `timeseries.parquet` columns (energy cumulative since the start).
    pub fn to_columns(&self) -> llem_results::TimeseriesColumns {
        let mut c = llem_results::TimeseriesColumns::default();
        let f = |v: f32| (!v.is_nan()).then_some(f64::from(v));
        for s in &self.series {
            let cumulative = s.cumulative_energy();
            for i in 0..s.len() {
                let g32 = |v: &Vec<f32>| v.get(i).copied().and_then(f);
                c.t_s.push(s.t_s.get(i).copied().unwrap_or(f64::NAN));
                c.domain.push(s.domain.name.clone());
                c.gpu_idx.push(
                    (s.domain.kind == DomainKind::Gpu)
                        .then(|| i32::try_from(s.domain.index).unwrap_or(i32::MAX)),
                );
                c.device_index
                    .push(i32::try_from(s.domain.index).unwrap_or(i32::MAX));
                c.power_w.push(s.power_w.get(i).copied().and_then(opt));
                c.energy_j.push(cumulative.get(i).copied().and_then(opt));
                c.temperature_c.push(g32(&s.temperature_c));
                c.memory_used_mib.push(g32(&s.memory_used_mib));
                c.memory_total_mib.push(g32(&s.memory_total_mib));
                c.sm_clock_mhz.push(g32(&s.sm_clock_mhz));
                c.sm_util_pct.push(g32(&s.sm_util_pct));
                c.mem_util_pct.push(g32(&s.mem_util_pct));
                c.throttle_reasons.push(s.throttle_reasons(i));
                c.power_avg_w
                    .push(s.power_avg_w.get(i).copied().and_then(opt));
            }
        }
        c
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn domain(name: &str) -> Domain {
        Domain {
            name: name.into(),
            kind: DomainKind::Gpu,
            index: 0,
            device: "test".into(),
        }
    }

    fn telemetry(series: Vec<Series>) -> Telemetry {
        let start = series
            .iter()
            .filter_map(|s| s.t_s.first())
            .fold(f64::MAX, |a, b| a.min(*b));
        let end = series
            .iter()
            .filter_map(|s| s.t_s.last())
            .fold(f64::MIN, |a, b| a.max(*b));
        Telemetry {
            series,
            start_s: start,
            end_s: end,
            ..Telemetry::default()
        }
    }

    /// Power that is constant between samples: the counter is piecewise linear, so counter
    /// interpolation is exact even for windows whose edges fall between samples.
    #[test]
    fn counter_energy_matches_closed_form_between_samples() {
        let mut s = Series::new(domain("gpu0"), SensorKind::Nvml, true, false);
        // 0.1 s samples; power 100 W on [0, 1), 300 W on [1, 2].
        let energy = |t: f64| {
            if t < 1.0 {
                100.0 * t
            } else {
                100.0 + 300.0 * (t - 1.0)
            }
        };
        for i in 0..=20 {
            let t = f64::from(i) * 0.1;
            s.push(
                t,
                &Reading {
                    energy_j: Some(1000.0 + energy(t)),
                    ..Reading::default()
                },
            );
        }
        let tm = telemetry(vec![s]);
        for (a, b) in [(0.0, 2.0), (0.05, 0.55), (0.93, 1.37), (0.5, 1.999)] {
            let w = tm.energy(a, b);
            let want = energy(b) - energy(a);
            assert!(
                (w.total_j - want).abs() < 1e-9,
                "[{a}, {b}]: {} vs {want}",
                w.total_j
            );
            assert_eq!(w.energy_source, Some(EnergySource::Counter));
        }
        let w = tm.energy(0.0, 2.0);
        assert!((w.domains[0].peak_power_w.unwrap() - 300.0).abs() < 1e-9);
        assert!((w.domains[0].avg_power_w - 200.0).abs() < 1e-9);
    }

    /// Power linear in time: the trapezoid rule is exact, including clipped edge segments.
    #[test]
    fn integrated_energy_matches_closed_form_between_samples() {
        let mut s = Series::new(domain("gpu0"), SensorKind::Nvml, false, true);
        let power = |t: f64| 50.0 + 20.0 * t;
        let energy = |t: f64| 50.0 * t + 10.0 * t * t;
        // Irregular sample times.
        let times = [0.0, 0.07, 0.2, 0.31, 0.5, 0.72, 0.9, 1.15, 1.4, 1.6, 2.0];
        for t in times {
            s.push(
                t,
                &Reading {
                    power_w: Some(power(t)),
                    ..Reading::default()
                },
            );
        }
        let tm = telemetry(vec![s]);
        for (a, b) in [(0.0, 2.0), (0.05, 0.55), (0.33, 1.5), (1.9, 1.95)] {
            let w = tm.energy(a, b);
            let want = energy(b) - energy(a);
            assert!(
                (w.total_j - want).abs() < 1e-9,
                "[{a}, {b}]: {} vs {want}",
                w.total_j
            );
            assert_eq!(w.energy_source, Some(EnergySource::Integrated));
        }
    }

    #[test]
    fn counter_and_power_disagreement_warns() {
        let mut s = Series::new(domain("gpu0"), SensorKind::Nvml, true, true);
        for i in 0..=10 {
            let t = f64::from(i) * 0.1;
            // Counter says 100 W, power says 110 W.
            s.push(
                t,
                &Reading {
                    energy_j: Some(100.0 * t),
                    power_w: Some(110.0),
                    ..Reading::default()
                },
            );
        }
        let w = telemetry(vec![s]).energy(0.0, 1.0);
        let d = &w.domains[0];
        assert_eq!(d.energy_source, EnergySource::Counter);
        assert!((d.energy_j - 100.0).abs() < 1e-9);
        assert!((d.disagreement.unwrap() - 0.1).abs() < 1e-9);
        assert!(
            w.warnings.iter().any(|m| m.contains("disagree by 10.0 %")),
            "{:?}",
            w.warnings
        );
    }

    #[test]
    fn total_takes_the_weakest_source_and_estimates_are_labelled() {
        let mut gpu = Series::new(domain("gpu0"), SensorKind::Nvml, true, false);
        let mut cpu = Series::new(domain("package-0"), SensorKind::Estimate, false, true);
        for i in 0..=10 {
            let t = f64::from(i) * 0.1;
            gpu.push(
                t,
                &Reading {
                    energy_j: Some(200.0 * t),
                    ..Reading::default()
                },
            );
            cpu.push(
                t,
                &Reading {
                    power_w: Some(10.0),
                    ..Reading::default()
                },
            );
        }
        let w = telemetry(vec![gpu, cpu]).energy(0.0, 1.0);
        assert!((w.total_j - 210.0).abs() < 1e-9);
        assert_eq!(w.energy_source, Some(EnergySource::Estimate));
        assert_eq!(w.domains[1].energy_source, EnergySource::Estimate);
    }

    #[test]
    fn cumulative_energy_starts_at_zero() {
        let mut s = Series::new(domain("gpu0"), SensorKind::Amdgpu, false, true);
        for (t, p) in [(0.0, 10.0), (1.0, 20.0), (2.0, f64::NAN), (3.0, 20.0)] {
            s.push(
                t,
                &Reading {
                    power_w: opt(p),
                    ..Reading::default()
                },
            );
        }
        let c = s.cumulative_energy();
        assert_eq!(c[0], 0.0);
        assert_eq!(c[1], 15.0);
        assert!(c[2].is_nan());
        assert_eq!(c[3], 55.0);
    }

    #[test]
    fn windows_beyond_the_samples_warn() {
        let mut s = Series::new(domain("gpu0"), SensorKind::Nvml, true, false);
        s.push(
            1.0,
            &Reading {
                energy_j: Some(0.0),
                ..Reading::default()
            },
        );
        s.push(
            2.0,
            &Reading {
                energy_j: Some(10.0),
                ..Reading::default()
            },
        );
        let w = telemetry(vec![s]).energy(0.0, 3.0);
        assert_eq!(w.total_j, 10.0);
        assert!(w.warnings[0].contains("extends beyond the samples"));
    }
}
