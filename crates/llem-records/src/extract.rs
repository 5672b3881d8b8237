//! Per-request extraction (reference §11): output lengths, smoothed inter-token latencies and
//! power/temperature timelines, read again from each run's raw files — ML.ENERGY
//! `results.json` or a llem cell's `requests.parquet` / `timeseries.parquet`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::RecordsError;
use super::itl;
use super::lenient::{Lenient, NumberList, RawRequest};
use super::run::{LlmRun, RunSource};
use super::runs::Runs;
use llem_results::layout;

/// Identifies the run a row came from.
#[derive(Clone, Debug, PartialEq)]
pub struct RunKey {
    /// The run's results file.
    pub results_path: String,
    /// Task.
    pub task: String,
    /// Model id.
    pub model_id: String,
    /// GPUs.
    pub num_gpus: i64,
    /// Batch limit.
    pub max_num_seqs: i64,
}

impl RunKey {
    pub(crate) fn of(r: &LlmRun) -> Self {
        Self {
            results_path: r.results_path.clone(),
            task: r.task.clone(),
            model_id: r.model_id.clone(),
            num_gpus: r.num_gpus,
            max_num_seqs: r.max_num_seqs,
        }
    }
}

/// One request's output length.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputLength {
    /// The run.
    pub run: RunKey,
    /// Output tokens.
    pub output_len: i64,
    /// Whether the request succeeded.
    pub success: bool,
}

/// One inter-token latency sample.
#[derive(Clone, Debug, PartialEq)]
pub struct ItlSample {
    /// The run.
    pub run: RunKey,
    /// Seconds.
    pub itl_s: f64,
}

/// One timeline row: the sum over devices at one base-device timestamp.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelinePoint {
    /// The run.
    pub run: RunKey,
    /// Epoch seconds (ML.ENERGY) or seconds since the experiment started (llem).
    pub timestamp: f64,
    /// Seconds since the window opened.
    pub relative_time_s: f64,
    /// W or °C, summed over devices.
    pub value: f64,
    /// The metric name.
    pub metric: String,
}

/// Timeline metrics (§11.3).
pub const TIMELINE_METRICS: &[&str] = &[
    "power.device_instant",
    "power.device_average",
    "temperature",
];

fn is_llem(r: &LlmRun) -> bool {
    r.extra.source == Some(RunSource::Llem)
        || (r.extra.source == Some(RunSource::Compiled) && r.results_path.ends_with(layout::RESULT))
}

fn err(path: &str, message: impl Into<String>) -> RecordsError {
    RecordsError::Invalid {
        path: path.into(),
        message: message.into(),
    }
}

#[derive(Deserialize)]
struct RequestsOnly {
    #[serde(default)]
    results: Option<Vec<RawRequest>>,
}

fn raw_requests(path: &str) -> Result<Vec<RawRequest>, RecordsError> {
    let bytes = llem_config::files::read_record(path).map_err(|e| err(path, e.to_string()))?;
    let r: RequestsOnly = serde_json::from_slice(&bytes).map_err(|e| err(path, e.to_string()))?;
    r.results
        .ok_or_else(|| err(path, "results.json has no `results` array"))
}

fn llem_requests(r: &LlmRun) -> Result<Vec<llem_results::RequestRecord>, RecordsError> {
    let p = Path::new(&r.results_path).with_file_name(layout::REQUESTS);
    Ok(llem_results::requests::read_requests(&p)?)
}

impl Runs {
    /// Per-request output lengths, runs in collection order, requests in file order
    /// (§11.1). Failed requests only with `include_unsuccessful`.
    pub fn output_lengths(
        &self,
        include_unsuccessful: bool,
    ) -> Result<Vec<OutputLength>, RecordsError> {
        let mut out = Vec::new();
        for r in self.iter() {
            let key = RunKey::of(r);
            if is_llem(r) {
                for q in llem_requests(r)? {
                    if q.success || include_unsuccessful {
                        out.push(OutputLength {
                            run: key.clone(),
                            output_len: i64::from(q.output_tokens),
                            success: q.success,
                        });
                    }
                }
                continue;
            }
            for (i, q) in raw_requests(&r.results_path)?.iter().enumerate() {
                let ok = q.ok();
                if !ok && !include_unsuccessful {
                    continue;
                }
                match q.output_len.0 {
                    Some(n) => out.push(OutputLength {
                        run: key.clone(),
                        output_len: n as i64,
                        success: ok,
                    }),
                    None if ok => {
                        return Err(err(
                            &r.results_path,
                            format!("results[{i}] is successful but has no output_len"),
                        ));
                    }
                    None => {}
                }
            }
        }
        Ok(out)
    }

    /// Smoothed inter-token latencies of successful requests, > 0 and finite, seconds
    /// (§11.2). A run with none is an error.
    pub fn inter_token_latencies(&self) -> Result<Vec<ItlSample>, RecordsError> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for r in self.iter() {
            let key = RunKey::of(r);
            buf.clear();
            if is_llem(r) {
                for q in llem_requests(r)?.iter().filter(|q| q.success) {
                    itl::smooth_into(&itl::gaps(&q.token_times_s), &mut buf);
                }
            } else {
                for (i, q) in raw_requests(&r.results_path)?.iter().enumerate() {
                    if !q.ok() {
                        continue;
                    }
                    match &q.itl {
                        NumberList::Values(v) => itl::smooth_into(v, &mut buf),
                        NumberList::Missing => {}
                        NumberList::Invalid => {
                            return Err(err(
                                &r.results_path,
                                format!("results[{i}].itl holds a value that is not a number"),
                            ));
                        }
                    }
                }
            }
            let before = out.len();
            out.extend(
                buf.iter()
                    .filter(|v| **v > 0.0 && v.is_finite())
                    .map(|v| ItlSample {
                        run: key.clone(),
                        itl_s: *v,
                    }),
            );
            if out.len() == before {
                return Err(err(&r.results_path, "no inter-token latency samples"));
            }
        }
        Ok(out)
    }

    /// Power or temperature over each run's steady state, summed over devices on the base
    /// device's timestamps (§11.3); sorted by task, model, relative time.
    pub fn timelines(&self, metric: &str) -> Result<Vec<TimelinePoint>, RecordsError> {
        check_metric(metric)?;
        let mut out = Vec::new();
        for r in self.iter() {
            let (series, window) = series_of(r, metric)?;
            let key = RunKey::of(r);
            let rows = align(&series, window).ok_or_else(|| {
                err(
                    &r.results_path,
                    "no sample of the base device in the window",
                )
            })?;
            out.extend(rows.into_iter().map(|(t, v)| TimelinePoint {
                run: key.clone(),
                timestamp: t,
                relative_time_s: t - window.0,
                value: v,
                metric: metric.to_string(),
            }));
        }
        sort_timeline(&mut out);
        Ok(out)
    }
}

/// `(seconds, value)` samples.
pub type Trace = Vec<(f64, f64)>;

/// A run's whole power trace (W summed over devices, seconds from its first sample) and its
/// measurement window on the same clock: what the report draws.
pub fn power_trace(r: &LlmRun) -> Result<(Trace, (f64, f64)), RecordsError> {
    let metric = "power.device_instant";
    let (series, window) = series_of(r, metric)?;
    let rows = align(&series, (f64::NEG_INFINITY, f64::INFINITY))
        .ok_or_else(|| err(&r.results_path, "no power samples"))?;
    let t0 = rows.first().map_or(0.0, |(t, _)| *t);
    Ok((
        rows.into_iter().map(|(t, v)| (t - t0, v)).collect(),
        (window.0 - t0, window.1 - t0),
    ))
}

/// A run's per-device series and window, from whichever files its source wrote.
fn series_of(r: &LlmRun, metric: &str) -> Result<(DeviceSeries, (f64, f64)), RecordsError> {
    if r.extra.source == Some(RunSource::Llem07) {
        super::llem07::series(r, metric)
    } else if is_llem(r) {
        llem_series(r, metric)
    } else {
        raw_series(&r.results_path, metric)
    }
}

/// Per-device samples in device order (the first is the base).
pub type DeviceSeries = Vec<Vec<(f64, f64)>>;

/// §11.3 alignment: the base device's samples inside `[s, e]` sorted by time; each other
/// device looked up at exactly those timestamps, gaps forward-filled, devices summed.
pub fn align(series: &DeviceSeries, (s, e): (f64, f64)) -> Option<Vec<(f64, f64)>> {
    let inside = |v: &[(f64, f64)]| -> Vec<(f64, f64)> {
        v.iter()
            .copied()
            .filter(|(t, _)| *t >= s && *t <= e)
            .collect()
    };
    let mut base = inside(series.first()?);
    if base.is_empty() {
        return None;
    }
    base.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut sums = vec![0.0; base.len()];
    for dev in series {
        let at: BTreeMap<u64, f64> = inside(dev)
            .into_iter()
            .map(|(t, v)| (t.to_bits(), v))
            .collect();
        let mut last: Option<f64> = None;
        for ((t, _), sum) in base.iter().zip(sums.iter_mut()) {
            if let Some(v) = at.get(&t.to_bits()) {
                last = Some(*v);
            }
            if let Some(v) = last {
                *sum += v;
            }
        }
    }
    Some(base.iter().map(|(t, _)| *t).zip(sums).collect())
}

/// `{"<gpu index>": [[t, value], ...]}`.
type Samples = BTreeMap<String, Vec<(f64, f64)>>;

/// One domain's samples: time, value, cumulative energy.
type DomainSamples = Vec<(f64, Option<f64>, Option<f64>)>;

#[derive(Deserialize, Default)]
struct RawTimelineFile {
    #[serde(default)]
    timeline: Option<RawTimeline>,
}

#[derive(Deserialize, Default)]
struct RawTimeline {
    #[serde(default)]
    steady_state_start_time: Lenient,
    #[serde(default)]
    steady_state_end_time: Lenient,
    #[serde(default)]
    power: Option<BTreeMap<String, Samples>>,
    #[serde(default)]
    temperature: Option<Samples>,
}

fn device_order(m: BTreeMap<String, Vec<(f64, f64)>>) -> DeviceSeries {
    let mut v: Vec<(i64, Vec<(f64, f64)>)> = m
        .into_iter()
        .map(|(k, s)| (super::raw_names::python_int(&k).unwrap_or(i64::MAX), s))
        .collect();
    v.sort_by_key(|(k, _)| *k);
    v.into_iter().map(|(_, s)| s).collect()
}

fn raw_series(path: &str, metric: &str) -> Result<(DeviceSeries, (f64, f64)), RecordsError> {
    let (series, bounds) = raw_timeline(path, metric)?;
    let window = bounds.ok_or_else(|| err(path, "timeline has no steady-state bounds"))?;
    Ok((series, window))
}

/// A raw `results.json`'s per-device series of `metric`, with its steady-state bounds when
/// it has both.
fn raw_timeline(
    path: &str,
    metric: &str,
) -> Result<(DeviceSeries, Option<(f64, f64)>), RecordsError> {
    let bytes = llem_config::files::read_record(path).map_err(|e| err(path, e.to_string()))?;
    let f: RawTimelineFile =
        serde_json::from_slice(&bytes).map_err(|e| err(path, e.to_string()))?;
    let tl = f
        .timeline
        .ok_or_else(|| err(path, "results.json has no timeline"))?;
    let bounds = tl.steady_state_start_time.0.zip(tl.steady_state_end_time.0);
    let series = match metric {
        "temperature" => tl.temperature,
        m => {
            let sub = m.trim_start_matches("power.");
            tl.power.and_then(|mut p| p.remove(sub))
        }
    }
    .ok_or_else(|| err(path, format!("timeline has no {metric} series")))?;
    Ok((device_order(series), bounds))
}

fn check_metric(metric: &str) -> Result<(), RecordsError> {
    if TIMELINE_METRICS.contains(&metric) {
        Ok(())
    } else {
        Err(RecordsError::Usage(format!(
            "unknown timeline metric {metric:?}; expected one of {}",
            TIMELINE_METRICS.join(", ")
        )))
    }
}

fn sort_timeline(out: &mut [TimelinePoint]) {
    out.sort_by(|a, b| {
        (&a.run.task, &a.run.model_id)
            .cmp(&(&b.run.task, &b.run.model_id))
            .then(a.relative_time_s.total_cmp(&b.relative_time_s))
    });
}

impl super::DiffusionRuns {
    /// Power or temperature over each diffusion run's whole series (§13: no window;
    /// `relative_time_s` from the base device's first sample in file order), summed over
    /// devices as for LLM runs; sorted by task, model, relative time. The key's
    /// `max_num_seqs` holds the run's batch size.
    pub fn timelines(&self, metric: &str) -> Result<Vec<TimelinePoint>, RecordsError> {
        check_metric(metric)?;
        let mut out = Vec::new();
        for r in self.iter() {
            let (series, _) = raw_timeline(&r.results_path, metric)?;
            let t0 = series
                .first()
                .and_then(|b| b.first())
                .map(|(t, _)| *t)
                .ok_or_else(|| err(&r.results_path, "no sample of the base device"))?;
            let rows = align(&series, (f64::NEG_INFINITY, f64::INFINITY))
                .ok_or_else(|| err(&r.results_path, "no sample of the base device"))?;
            let key = RunKey {
                results_path: r.results_path.clone(),
                task: r.task.clone(),
                model_id: r.model_id.clone(),
                num_gpus: r.num_gpus,
                max_num_seqs: r.batch_size,
            };
            out.extend(rows.into_iter().map(|(t, v)| TimelinePoint {
                run: key.clone(),
                timestamp: t,
                relative_time_s: t - t0,
                value: v,
                metric: metric.to_string(),
            }));
        }
        sort_timeline(&mut out);
        Ok(out)
    }
}

/// A llem cell's series: the domains its headline energy sums (`energy_breakdown.
/// scope_domains`, the same domains as its `baseline_power_w`), or for a result that does not
/// name them the GPU domains when there are any, else every domain (CPU package, DRAM); on
/// the package's (or first GPU's) timestamps. `power.device_average` is the average power
/// over each sampling interval from the energy counter where there is one.
pub fn llem_series(r: &LlmRun, metric: &str) -> Result<(DeviceSeries, (f64, f64)), RecordsError> {
    let dir = Path::new(&r.results_path);
    let ts = llem_results::read_timeseries(&dir.with_file_name(layout::TIMESERIES))?;
    let result: llem_results::ExperimentResult = serde_json::from_slice(
        &llem_config::files::read_record(dir).map_err(|e| err(&r.results_path, e.to_string()))?,
    )
    .map_err(|e| err(&r.results_path, e.to_string()))?;
    let window = result
        .measurement_window_s
        .map(|[a, b]| (a, b))
        .ok_or_else(|| err(&r.results_path, "result.json has no measurement_window_s"))?;
    let scope: Vec<String> = result
        .energy_breakdown
        .as_ref()
        .map(|b| b.scope_domains.clone())
        .unwrap_or_default();
    let gpu_only = ts.domain.iter().any(|d| d.starts_with("gpu"));
    let keep = |d: &str| {
        if scope.is_empty() {
            !gpu_only || d.starts_with("gpu")
        } else {
            scope.iter().any(|s| s == d)
        }
    };
    let mut by_domain: BTreeMap<(bool, String), DomainSamples> = BTreeMap::new();
    for i in 0..ts.len() {
        let (Some(t), Some(d)) = (ts.t_s.get(i), ts.domain.get(i)) else {
            continue;
        };
        if !keep(d) {
            continue;
        }
        let v = match metric {
            "temperature" => ts.temperature_c.get(i).copied().flatten(),
            _ => ts.power_w.get(i).copied().flatten(),
        };
        let energy = ts.energy_j.get(i).copied().flatten();
        if v.is_some() || energy.is_some() {
            // Package domains first so the base device is the CPU (or GPU 0).
            by_domain
                .entry((
                    !d.starts_with("package") && !d.starts_with("gpu"),
                    d.clone(),
                ))
                .or_default()
                .push((*t, v, energy));
        }
    }
    let power = metric.starts_with("power.");
    let mut series: DeviceSeries = by_domain
        .into_values()
        .map(|s| {
            // A counter-only domain (RAPL) records energy and no power: its power is the
            // counter's rise over each sampling interval, as the average power is anyway.
            let counter_only = s.iter().all(|p| p.1.is_none());
            if power && (metric == "power.device_average" || counter_only) {
                s.iter()
                    .zip(s.iter().skip(1))
                    .filter_map(|(a, b)| match (a.2, b.2) {
                        (Some(e0), Some(e1)) if b.0 > a.0 => Some((b.0, (e1 - e0) / (b.0 - a.0))),
                        _ => b.1.map(|v| (b.0, v)),
                    })
                    .collect()
            } else {
                s.into_iter()
                    .filter_map(|(t, v, _)| v.map(|v| (t, v)))
                    .collect()
            }
        })
        .filter(|s: &Vec<(f64, f64)>| !s.is_empty())
        .collect();
    snap_to_base(&mut series);
    Ok((series, window))
}

/// Moves every other device's samples onto the base device's nearest timestamp when they lie
/// within a quarter of its median sampling interval. llem reads its domains one after another in a
/// tick (DRAM microseconds after the package), and the §11.3 alignment matches timestamps
/// exactly: without this no other domain would ever be added to the base.
fn snap_to_base(series: &mut DeviceSeries) {
    let Some(base) = series.first() else {
        return;
    };
    let mut times: Vec<f64> = base.iter().map(|(t, _)| *t).collect();
    times.sort_by(f64::total_cmp);
    let mut gaps: Vec<f64> = times
        .iter()
        .zip(times.iter().skip(1))
        .map(|(a, b)| b - a)
        .filter(|g| *g > 0.0)
        .collect();
    gaps.sort_by(f64::total_cmp);
    let Some(tolerance) = gaps.get(gaps.len() / 2).map(|g| g / 4.0) else {
        return;
    };
    for dev in series.iter_mut().skip(1) {
        for (t, _) in dev.iter_mut() {
            let i = times.partition_point(|b| *b < *t);
            let nearest = [i.checked_sub(1), Some(i)]
                .into_iter()
                .flatten()
                .filter_map(|k| times.get(k).copied())
                .min_by(|a, b| (a - *t).abs().total_cmp(&(b - *t).abs()));
            if let Some(b) = nearest.filter(|b| (b - *t).abs() <= tolerance) {
                *t = b;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::{align, snap_to_base};

    #[test]
    fn domains_read_in_one_tick_are_summed_on_the_base_timestamps() {
        // The package at 0.1 s intervals, DRAM a few microseconds later in each tick, and
        // one DRAM sample far from any tick (left where it is, so never matched).
        let package = vec![(0.000490, 3.4), (0.100603, 4.0), (0.201350, 9.5)];
        let dram = vec![
            (0.000496, 8.8),
            (0.100623, 8.9),
            (0.150000, 50.0),
            (0.201380, 9.0),
        ];
        let mut series = vec![package, dram];
        snap_to_base(&mut series);
        let rows = align(&series, (f64::NEG_INFINITY, f64::INFINITY)).unwrap();
        let sums: Vec<f64> = rows
            .iter()
            .map(|(_, v)| (v * 10.0).round() / 10.0)
            .collect();
        assert_eq!(sums, vec![12.2, 12.9, 18.5]);
        assert_eq!(rows[0].0, 0.000490);
        // One sample has no interval to judge by: nothing moves.
        let mut lone = vec![vec![(1.0, 1.0)], vec![(1.001, 2.0)]];
        snap_to_base(&mut lone);
        assert_eq!(lone[1], vec![(1.001, 2.0)]);
    }

    #[test]
    fn alignment_follows_the_base_device() {
        let base = vec![(0.5, 1.0), (2.0, 3.0), (1.0, 2.0), (5.0, 9.0)];
        // GPU 1 lacks t=1.0 (forward fill) and has a sample the base lacks (never used).
        let other = vec![(0.5, 10.0), (1.5, 99.0), (2.0, 30.0)];
        let late = vec![(2.0, 100.0)];
        let rows = align(&vec![base, other, late], (0.5, 2.0)).unwrap();
        assert_eq!(rows, vec![(0.5, 11.0), (1.0, 12.0), (2.0, 133.0)]);
        assert!(align(&vec![vec![(9.0, 1.0)]], (0.0, 1.0)).is_none());
    }
}
