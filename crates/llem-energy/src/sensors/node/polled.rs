//! A slow source read in a thread of its own, handed to the sampler as a [`Sensor`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{NodeReading, NodeSource, NodeUnavailable};
use crate::sensor::{Domain, DomainKind, Reading, Sensor, SensorError, SensorKind};

/// What the poller thread shares with the sampler.
#[derive(Default)]
struct Shared {
    /// Polls done; a reading is fresh for the sampler when this moved since its last read.
    seq: u64,
    /// The newest poll: when it finished and what it gave.
    latest: Option<(Instant, Result<NodeReading, String>)>,
    /// When the value that gets integrated changed, for the observed update period.
    changes: Vec<Instant>,
    last_value: Option<f64>,
}

/// A node source polled in its own thread every `interval`.
pub struct Polled {
    domain: Domain,
    kind: SensorKind,
    has_counter: bool,
    interval: Duration,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    seen: u64,
    notes: Vec<String>,
    /// The period the source reported at the first poll, s.
    reported_period_s: Option<f64>,
    /// Whether its average is what gets integrated: only when it averages over no more
    /// than about two polls (a longer average would smear the window's edges).
    use_average: bool,
}

/// The power of a reading that gets integrated: the source's average when `use_average`
/// and it has one, else its instantaneous power.
fn integrated_w(v: &NodeReading, use_average: bool) -> Option<f64> {
    match v.average_w {
        Some(a) if use_average => Some(a),
        _ => v.power_w.or(v.average_w),
    }
}

impl Polled {
    /// Reads `source` once (an error says it cannot be used), then starts its poller.
    pub fn start(
        mut source: Box<dyn NodeSource>,
        interval: Duration,
    ) -> Result<Polled, NodeUnavailable> {
        let first = source.poll()?;
        let kind = source.kind();
        let mut notes = source.notes();
        let reported = first.period_s;
        match reported {
            Some(p) if p <= 0.0 => notes.push(format!(
                "{}: the source reports an averaging period of 0 s (it does not say); the \
                 update period measured while sampling is used",
                kind.as_str()
            )),
            Some(p) if p > 2.0 * interval.as_secs_f64() => notes.push(format!(
                "{}: the source averages over {p:.0} s, longer than the {:.2} s poll interval: \
                 its instantaneous reading is integrated instead",
                kind.as_str(),
                interval.as_secs_f64()
            )),
            _ => {}
        }
        let domain = Domain {
            name: "node".into(),
            kind: DomainKind::Node,
            index: 0,
            device: source.describe(),
        };
        let has_counter = source.has_counter();
        let reported_period_s = reported.filter(|p| *p > 0.0);
        let use_average = reported_period_s.is_some_and(|p| p <= 2.0 * interval.as_secs_f64());
        // What the update period is judged on: the value that gets integrated.
        let value = move |v: &NodeReading| {
            if has_counter {
                v.energy_j
            } else {
                integrated_w(v, use_average)
            }
        };
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sh, st) = (shared.clone(), stop.clone());
        record(&shared, Instant::now(), Ok(first), value);
        std::thread::Builder::new()
            .name("llem-node-poll".into())
            .spawn(move || poll_loop(source, interval, (&sh, &st), value))
            .map_err(|e| SensorError::Node {
                source_name: kind.as_str(),
                message: format!("cannot start the poller thread: {e}"),
            })?;
        Ok(Polled {
            domain,
            kind,
            has_counter,
            interval,
            shared,
            stop,
            seen: 0,
            notes,
            reported_period_s,
            use_average,
        })
    }
}

fn record(
    shared: &Mutex<Shared>,
    at: Instant,
    r: Result<NodeReading, String>,
    value: impl Fn(&NodeReading) -> Option<f64>,
) {
    let Ok(mut s) = shared.lock() else { return };
    if let Ok(v) = &r {
        let value = value(v);
        if value.is_some() && value != s.last_value {
            if s.last_value.is_some() {
                s.changes.push(at);
            }
            s.last_value = value;
        }
    }
    s.seq += 1;
    s.latest = Some((at, r));
}

fn poll_loop(
    mut source: Box<dyn NodeSource>,
    interval: Duration,
    (shared, stop): (&Mutex<Shared>, &AtomicBool),
    value: impl Fn(&NodeReading) -> Option<f64>,
) {
    let mut next = Instant::now() + interval;
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        if stop.load(Ordering::Acquire) {
            break;
        }
        next += interval;
        let r = source.poll().map_err(|e| e.to_string());
        record(shared, Instant::now(), r, &value);
        // A source slower than its interval is polled back to back, never in a burst.
        next = next.max(Instant::now());
    }
}

impl Drop for Polled {
    fn drop(&mut self) {
        // The thread finishes its current poll (bounded by the source's own timeout) and
        // exits; nothing waits for it.
        self.stop.store(true, Ordering::Release);
    }
}

impl Sensor for Polled {
    fn domain(&self) -> &Domain {
        &self.domain
    }
    fn kind(&self) -> SensorKind {
        self.kind
    }
    fn has_counter(&self) -> bool {
        self.has_counter
    }
    fn has_power(&self) -> bool {
        true
    }
    fn read(&mut self, _detail: bool) -> Result<Reading, SensorError> {
        let Ok(s) = self.shared.lock() else {
            return Ok(Reading::default());
        };
        if s.seq == self.seen {
            // Nothing new since the last tick: no sample (a repeated value would draw a
            // staircase between polls).
            return Ok(Reading::default());
        }
        self.seen = s.seq;
        let Some((at, r)) = &s.latest else {
            return Ok(Reading::default());
        };
        let v = r.as_ref().map_err(|m| SensorError::Node {
            source_name: self.kind.as_str(),
            message: m.clone(),
        })?;
        let averaged = self.use_average && v.average_w.is_some();
        let power = integrated_w(v, self.use_average);
        // An average over a period is the power of the period's middle; a counter's value
        // is the poll's own (it is what gets used then).
        let centre = if averaged && !self.has_counter {
            self.reported_period_s.unwrap_or(0.0) / 2.0
        } else {
            0.0
        };
        Ok(Reading {
            energy_j: v.energy_j,
            power_w: power,
            power_avg_w: v.average_w,
            age_s: Some(at.elapsed().as_secs_f64() + centre),
            ..Reading::default()
        })
    }
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
    fn changes_every(&self) -> Option<Duration> {
        // Fresh readings come once per poll; their age stamps them where they belong.
        Some(self.interval)
    }
    fn observed_update_period_s(&self) -> Option<f64> {
        let s = self.shared.lock().ok()?;
        let mut gaps: Vec<f64> = s
            .changes
            .windows(2)
            .filter_map(|w| match w {
                [a, b] => Some(b.duration_since(*a).as_secs_f64()),
                _ => None,
            })
            .collect();
        gaps.sort_by(f64::total_cmp);
        let median = gaps.get(gaps.len() / 2).copied();
        // Never finer than the polls or than what the source says it resolves.
        let averaged_over = self.reported_period_s.filter(|_| self.use_average);
        [Some(self.interval.as_secs_f64()), averaged_over, median]
            .into_iter()
            .flatten()
            .reduce(f64::max)
    }
}
