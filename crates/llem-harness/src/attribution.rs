//! Where the window's joules went: to prefill, decode and the time between passes, and to
//! each request.
//!
//! The window's energy is cut along one cumulative curve ([`EnergyCurve`]), so the parts add
//! up to the whole by construction; what is checked on every run is that the curve's whole
//! is the headline's (same domains, same sources), within [`SUM_TOLERANCE`].
//!
//! - **Engine steps** (the embedded and transformers engines log every forward pass): each
//!   pass's energy goes to its phase and to the requests in it by their share of its tokens;
//!   the time between passes is `idle`.
//! - **Request concurrency** (served engines, which only say when each request was sent and
//!   when its tokens came): between any two request events the energy is shared equally by
//!   the requests in flight, each in its phase then (prefill until its first token, decode
//!   after); time with nothing in flight is `idle`.
//!
//! A request's `energy_j` is its prefill and decode shares plus its share, in proportion to
//! them, of the idle energy and of passes that named no request, so the requests' energies
//! add up to the window's.

use std::collections::HashMap;

use llem_energy::EnergyCurve;
use llem_engines::{Step, StepKind};
use llem_results::{RequestEnergy, RequestRecord};

/// Largest gap, as a fraction of the window's energy, between the window and its parts.
pub const SUM_TOLERANCE: f64 = 0.005;

/// The window's energy split by phase and by request.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribution {
    /// `engine_steps` or `request_concurrency`.
    pub method: &'static str,
    /// Prefill passes (served: requests awaiting their first token), J.
    pub prefill_j: f64,
    /// Decode passes (served: requests streaming), J.
    pub decode_j: f64,
    /// No pass running (served: nothing in flight), J.
    pub idle_j: f64,
    /// Each request's energy, by request id; a request with no time in the window has none.
    pub requests: HashMap<u32, RequestEnergy>,
}

impl Attribution {
    /// The parts together, J.
    pub fn total_j(&self) -> f64 {
        self.prefill_j + self.decode_j + self.idle_j
    }

    /// What is wrong when the parts, or the requests, do not add up to `window_j`.
    pub fn sum_warning(&self, window_j: f64) -> Option<String> {
        if window_j <= 0.0 {
            return None;
        }
        let requests_j: f64 = self.requests.values().map(|r| r.energy_j).sum();
        let parts_gap = (self.total_j() - window_j) / window_j;
        let requests_gap = (requests_j - window_j) / window_j;
        let (what, gap, sum) = if parts_gap.abs() >= requests_gap.abs() {
            ("prefill, decode and idle energy", parts_gap, self.total_j())
        } else {
            ("the requests' energies", requests_gap, requests_j)
        };
        (gap.abs() > SUM_TOLERANCE).then(|| {
            format!(
                "{what} add up to {sum:.3} J, {:+.2} % off the window's {window_j:.3} J (more \
                 than {} %): the per-request and prefill/decode figures are off by as much",
                gap * 100.0,
                SUM_TOLERANCE * 100.0
            )
        })
    }
}

/// Prefill and decode energy of one request, before the idle share.
#[derive(Clone, Copy, Default)]
struct Parts {
    prefill_j: f64,
    decode_j: f64,
}

/// Splits `window` by the engine's passes.
pub fn by_steps(curve: &EnergyCurve, (t0, t1): (f64, f64), steps: &[Step]) -> Attribution {
    let mut order: Vec<&Step> = steps.iter().collect();
    order.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let (mut prefill_j, mut decode_j, mut idle_j, mut unnamed_j) = (0.0, 0.0, 0.0, 0.0);
    let mut parts: HashMap<u32, Parts> = HashMap::new();
    // The window is accounted up to `cursor`; a pass overlapping the one before (none of
    // llem's engines overlap them) is counted from where that one ended.
    let mut cursor = t0;
    for s in order {
        let a = s.start_s.clamp(t0, t1).max(cursor);
        let b = s.end_s.clamp(t0, t1);
        if b <= a {
            continue;
        }
        if a > cursor {
            idle_j += curve.between(cursor, a);
        }
        let e = curve.between(a, b);
        cursor = b;
        match s.kind {
            StepKind::Prefill => prefill_j += e,
            StepKind::Decode => decode_j += e,
        }
        let tokens: u64 = s.tokens.iter().map(|&(_, n)| u64::from(n)).sum();
        if tokens == 0 {
            unnamed_j += e;
            continue;
        }
        for &(request, n) in &s.tokens {
            let share = e * f64::from(n) / tokens as f64;
            let p = parts.entry(request).or_default();
            match s.kind {
                StepKind::Prefill => p.prefill_j += share,
                StepKind::Decode => p.decode_j += share,
            }
        }
    }
    if t1 > cursor {
        idle_j += curve.between(cursor, t1);
    }
    Attribution {
        method: "engine_steps",
        prefill_j,
        decode_j,
        idle_j,
        requests: with_overhead(parts, idle_j + unnamed_j),
    }
}

/// What happens to a request at a time.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Edge {
    /// It is sent (prefill begins).
    Submit,
    /// Its first token arrives (decode begins).
    First,
    /// It ends.
    End,
}

/// Splits `window` by the requests in flight.
pub fn by_concurrency(
    curve: &EnergyCurve,
    (t0, t1): (f64, f64),
    records: &[RequestRecord],
) -> Attribution {
    let mut edges: Vec<(f64, Edge, usize)> = Vec::with_capacity(records.len() * 3);
    for (i, r) in records.iter().enumerate() {
        let (a, b) = (r.submit_s.clamp(t0, t1), r.end_s.clamp(t0, t1));
        if b <= a {
            continue;
        }
        edges.push((a, Edge::Submit, i));
        if let Some(f) = r.first_token_s.filter(|f| *f > a && *f < b) {
            edges.push((f, Edge::First, i));
        }
        edges.push((b, Edge::End, i));
    }
    // Ends before starts at one instant: a request that ended then is not in flight after.
    edges.sort_by(|x, y| x.0.total_cmp(&y.0).then(y.1.cmp(&x.1)));
    let (mut prefill_j, mut decode_j, mut idle_j) = (0.0, 0.0, 0.0);
    let mut parts: Vec<Parts> = vec![Parts::default(); records.len()];
    // In flight: record index and whether it has its first token; `slot` finds its place.
    let mut active: Vec<(usize, bool)> = Vec::new();
    let mut slot: Vec<usize> = vec![usize::MAX; records.len()];
    let mut prev = t0;
    for (t, edge, i) in edges {
        if t > prev {
            let e = curve.between(prev, t);
            if active.is_empty() {
                idle_j += e;
            } else {
                let share = e / active.len() as f64;
                for &(j, decoding) in &active {
                    if let Some(p) = parts.get_mut(j) {
                        if decoding {
                            p.decode_j += share;
                            decode_j += share;
                        } else {
                            p.prefill_j += share;
                            prefill_j += share;
                        }
                    }
                }
            }
            prev = t;
        }
        match edge {
            Edge::Submit => {
                if let Some(s) = slot.get_mut(i) {
                    *s = active.len();
                }
                let decoding = records
                    .get(i)
                    .and_then(|r| r.first_token_s)
                    .is_some_and(|f| f <= t);
                active.push((i, decoding));
            }
            Edge::First => {
                if let Some(a) = slot.get(i).and_then(|&k| active.get_mut(k)) {
                    a.1 = true;
                }
            }
            Edge::End => {
                let Some(k) = slot.get(i).copied().filter(|&k| k < active.len()) else {
                    continue;
                };
                active.swap_remove(k);
                if let Some(&(moved, _)) = active.get(k)
                    && let Some(s) = slot.get_mut(moved)
                {
                    *s = k;
                }
            }
        }
    }
    if t1 > prev {
        idle_j += curve.between(prev, t1);
    }
    let by_id = records
        .iter()
        .zip(parts)
        .filter(|(r, _)| r.end_s.min(t1) > r.submit_s.max(t0))
        .map(|(r, p)| (r.request_id, p))
        .collect();
    Attribution {
        method: "request_concurrency",
        prefill_j,
        decode_j,
        idle_j,
        requests: with_overhead(by_id, idle_j),
    }
}

/// Each request's energy: its prefill and decode plus its share of `overhead_j` in
/// proportion to them (none when nothing was attributed to any request).
fn with_overhead(parts: HashMap<u32, Parts>, overhead_j: f64) -> HashMap<u32, RequestEnergy> {
    let attributed: f64 = parts.values().map(|p| p.prefill_j + p.decode_j).sum();
    if attributed <= 0.0 {
        return HashMap::new();
    }
    parts
        .into_iter()
        .map(|(id, p)| {
            let own = p.prefill_j + p.decode_j;
            let energy = RequestEnergy {
                energy_j: own + overhead_j * own / attributed,
                prefill_energy_j: p.prefill_j,
                decode_energy_j: p.decode_j,
                node_energy_j: None,
            };
            (id, energy)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use llem_energy::telemetry::Series;
    use llem_energy::{Domain, DomainKind, Reading, SensorKind, Telemetry};
    use llem_results::FinishReason;

    /// A power profile in watts by time, sampled every `dt_s` into a counter domain that
    /// updates every `update_s` (a writer's energy at the update instants).
    fn recorded(power: &dyn Fn(f64) -> f64, end_s: f64, dt_s: f64, update_s: f64) -> Telemetry {
        let mut s = Series::new(
            Domain {
                name: "package-0".into(),
                kind: DomainKind::CpuPackage,
                index: 0,
                device: String::new(),
            },
            SensorKind::Rapl,
            true,
            false,
        );
        // The exact energy, integrated at 0.1 ms.
        let fine = 1e-4;
        let n = (end_s / fine).ceil() as usize;
        let mut cum = Vec::with_capacity(n + 1);
        let mut acc = 0.0;
        cum.push(0.0);
        for k in 0..n {
            acc += power((k as f64 + 0.5) * fine) * fine;
            cum.push(acc);
        }
        let energy_at = |t: f64| cum[((t / fine).round() as usize).min(n)];
        // The counter updates on its own clock (3.7 ms out of phase with the reads); a read
        // sees the last update before it.
        let phase = 0.0037;
        let reads = (end_s / dt_s).round() as usize;
        for k in 0..=reads {
            let t = k as f64 * dt_s;
            let updated = ((t - phase) / update_s).floor() * update_s + phase;
            s.push(
                t,
                &Reading {
                    energy_j: Some(energy_at(updated.max(0.0))),
                    ..Reading::default()
                },
            );
        }
        Telemetry {
            series: vec![s],
            start_s: 0.0,
            end_s,
            ..Telemetry::default()
        }
    }

    /// Two batches of two requests, from 0.1 s: a prefill of `prefill_s`, then 20 decode
    /// passes of `decode_s`, `gap_s` between passes; request 1 of each batch stops after 10
    /// passes.
    fn script(prefill_s: f64, decode_s: f64, gap_s: f64) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut t = 0.1;
        for b in 0..2u32 {
            let (r0, r1) = (2 * b, 2 * b + 1);
            steps.push(Step {
                kind: StepKind::Prefill,
                start_s: t,
                end_s: t + prefill_s,
                tokens: vec![(r0, 30), (r1, 10)],
            });
            t += prefill_s + gap_s;
            for k in 0..20 {
                let mut tokens = vec![(r0, 1)];
                if k < 10 {
                    tokens.push((r1, 1));
                }
                steps.push(Step {
                    kind: StepKind::Decode,
                    start_s: t,
                    end_s: t + decode_s,
                    tokens,
                });
                t += decode_s + gap_s;
            }
        }
        steps
    }

    /// 30 W while prefilling, 12 W while decoding, 5 W otherwise.
    fn profile(steps: &[Step]) -> impl Fn(f64) -> f64 + '_ {
        move |t| {
            steps
                .iter()
                .find(|s| t >= s.start_s && t < s.end_s)
                .map_or(5.0, |s| match s.kind {
                    StepKind::Prefill => 30.0,
                    StepKind::Decode => 12.0,
                })
        }
    }

    #[test]
    fn passes_get_the_energy_of_their_phase_and_requests_add_up() {
        let steps = script(0.4, 0.05, 0.02);
        let end = 4.0;
        // A counter updated every millisecond, read every 10 ms (RAPL read at 100 Hz).
        let tel = recorded(&profile(&steps), end, 0.01, 0.001);
        let curve = EnergyCurve::of(&tel, &["package-0".into()]).unwrap();
        let window = (0.0, 3.8);
        let a = by_steps(&curve, window, &steps);
        let prefill_s = 2.0 * 0.4;
        let decode_s = 40.0 * 0.05;
        let rel = |x: f64, want: f64| ((x - want) / want).abs();
        assert!(rel(a.prefill_j, 30.0 * prefill_s) < 0.01, "{}", a.prefill_j);
        assert!(rel(a.decode_j, 12.0 * decode_s) < 0.01, "{}", a.decode_j);
        // The 20 ms gaps are two reads long: their edges smear into the passes beside them.
        let idle_s = 3.8 - prefill_s - decode_s;
        assert!(rel(a.idle_j, 5.0 * idle_s) < 0.03, "{}", a.idle_j);
        let window_j = curve.between(0.0, 3.8);
        assert!(a.sum_warning(window_j).is_none());
        let sum: f64 = a.requests.values().map(|r| r.energy_j).sum();
        assert!(rel(sum, window_j) < 1e-9);
        // Request 0 had 30 of the 40 prompt tokens and all 20 decode passes (10 alone).
        let r0 = a.requests[&0];
        assert!(rel(r0.prefill_energy_j, 30.0 * 0.4 * 0.75) < 0.01);
        assert!(rel(r0.decode_energy_j, 12.0 * 0.05 * (10.0 * 0.5 + 10.0)) < 0.01);
        // A wrong whole is reported with its gap.
        let w = a.sum_warning(window_j * 1.02).unwrap();
        assert!(w.contains("-1.96 %"), "{w}");
    }

    #[test]
    fn a_slow_counter_is_still_split_within_one_percent() {
        // NVML-like: updated every 20 ms, read every 10 ms; passes long against it, back
        // to back (each short gap would smear over two updates).
        let steps = script(1.0, 0.2, 0.0);
        let tel = recorded(&profile(&steps), 11.5, 0.01, 0.02);
        let curve = EnergyCurve::of(&tel, &["package-0".into()]).unwrap();
        let a = by_steps(&curve, (0.0, 11.0), &steps);
        assert!(
            (a.prefill_j / (30.0 * 2.0) - 1.0).abs() < 0.01,
            "{}",
            a.prefill_j
        );
        assert!(
            (a.decode_j / (12.0 * 8.0) - 1.0).abs() < 0.01,
            "{}",
            a.decode_j
        );
    }

    fn served(id: u32, submit: f64, first: f64, end: f64) -> RequestRecord {
        RequestRecord {
            session: None,
            energy: None,
            request_id: id,
            batch_index: None,
            input_tokens: 10,
            output_tokens: 5,
            reference_output_tokens: None,
            cached_input_tokens: None,
            scheduled_s: Some(submit),
            submit_s: submit,
            first_token_s: Some(first),
            end_s: end,
            success: true,
            error: None,
            finish_reason: FinishReason::Length,
            token_times_s: vec![first, end],
        }
    }

    #[test]
    fn served_requests_share_the_time_they_are_in_flight() {
        // 10 W flat: energy is time x 10.
        let tel = recorded(&|_| 10.0, 5.0, 0.01, 0.001);
        let curve = EnergyCurve::of(&tel, &["package-0".into()]).unwrap();
        // 0 alone 0.1-1 s (prefill to 0.5), both 1-2 s (1 prefilling to 1.5), 1 alone
        // 2-3 s, nothing 3-4 s.
        let recs = vec![served(0, 0.1, 0.5, 2.0), served(1, 1.0, 1.5, 3.0)];
        let a = by_concurrency(&curve, (0.1, 4.0), &recs);
        let near = |x: f64, want: f64| ((x - want) / want).abs() < 0.01;
        assert!(near(a.idle_j, 10.0), "{}", a.idle_j);
        assert!(near(a.prefill_j, 4.0 + 2.5), "{}", a.prefill_j);
        assert!(near(a.decode_j, 5.0 + 2.5 + 5.0 + 10.0), "{}", a.decode_j);
        let r0 = a.requests[&0];
        assert!(near(r0.prefill_energy_j, 4.0) && near(r0.decode_energy_j, 5.0 + 5.0));
        let sum: f64 = a.requests.values().map(|r| r.energy_j).sum();
        let window_j = curve.between(0.1, 4.0);
        assert!(((sum - window_j) / window_j).abs() < 1e-9, "{sum}");
        assert!(a.sum_warning(window_j).is_none());
    }
}
