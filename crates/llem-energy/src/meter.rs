//! The sampler: one background thread reading every sensor per tick, on absolute deadlines so
//! the schedule never drifts, until stopped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use crate::error::MeterError;
use crate::live::{LiveBoard, Publisher};
use crate::sensor::{DomainKind, Sensor};
use crate::telemetry::{SamplerStats, Series, Telemetry};

/// Sampler settings.
#[derive(Clone, Copy, Debug)]
pub struct MeterConfig {
    /// Time between ticks (energy and power read every tick).
    pub interval: Duration,
    /// Time between reads of the slow fields (temperature, memory, clocks, utilisation,
    /// throttle reasons); rounded to a whole number of ticks.
    pub detail_interval: Duration,
    /// Longest time spent measuring each counter's update period before sampling starts
    /// ([`crate::update_period`]); zero skips it.
    pub update_period_budget: Duration,
}

impl Default for MeterConfig {
    fn default() -> Self {
        MeterConfig {
            interval: Duration::from_millis(100),
            detail_interval: Duration::from_millis(100),
            update_period_budget: Duration::from_millis(300),
        }
    }
}

/// CPU time the calling thread has used, s (the sampler's own cost, reported with results).
fn thread_cpu_s() -> Option<f64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    Some(t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

/// What the sampler thread hands back: the recording and the sensors, for reuse.
type Recording = (Telemetry, Vec<Box<dyn Sensor>>);

/// One tick across every sensor, as a running phase may judge it (the warmup gate).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TickSummary {
    /// Time, s since the epoch.
    pub t_s: f64,
    /// Total power of the sensors that gave one, W.
    pub power_w: Option<f64>,
    /// Hottest temperature read (detail ticks only), °C.
    pub temperature_c: Option<f64>,
    /// Union of the throttle-reason bitmasks read (detail ticks only).
    pub throttle_reasons: Option<u64>,
}

/// How much of the recent past [`Meter::trail`] keeps, s.
pub const TRAIL_S: f64 = 3600.0;

/// The recent ticks, shared between the sampler and whoever asks.
type Trail = Arc<Mutex<VecDeque<TickSummary>>>;

/// A running sampler.
pub struct Meter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Recording>>,
    live_power: Arc<AtomicU64>,
    trail: Trail,
    /// Whether it publishes on a live board.
    publishes: bool,
}

impl Meter {
    /// Starts sampling `sensors`; sample times are seconds since `epoch`.
    pub fn start(
        sensors: Vec<Box<dyn Sensor>>,
        config: MeterConfig,
        epoch: Instant,
    ) -> Result<Meter, MeterError> {
        Meter::start_live(sensors, config, epoch, None)
    }

    /// [`Meter::start`], publishing each tick's running figures on `live` for exporters.
    pub fn start_live(
        sensors: Vec<Box<dyn Sensor>>,
        config: MeterConfig,
        epoch: Instant,
        live: Option<LiveBoard>,
    ) -> Result<Meter, MeterError> {
        if config.interval.is_zero() {
            return Err(MeterError::ZeroInterval);
        }
        for s in &sensors {
            if let Some(max) = s.max_read_interval()
                && config.interval > max
            {
                return Err(MeterError::IntervalTooLong {
                    interval: config.interval,
                    domain: s.domain().name.clone(),
                    max,
                });
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let live_power = Arc::new(AtomicU64::new(f64::NAN.to_bits()));
        let publishes = live.is_some();
        let (live, flag, board) = (live_power.clone(), stop.clone(), live);
        let trail: Trail = Arc::default();
        let keep = trail.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("llem-sampler".into())
            .spawn(move || {
                run(
                    sensors,
                    config,
                    epoch,
                    &flag,
                    (&live, &keep, board),
                    &ready_tx,
                )
            })
            .map_err(MeterError::Spawn)?;
        // Return only once the first sample is taken, so a window opened after start() is
        // covered by samples from its first instant.
        let _ = ready_rx.recv();
        Ok(Meter {
            stop,
            thread: Some(thread),
            live_power,
            trail,
            publishes,
        })
    }

    /// Whether it publishes on a live board (live metrics are on).
    pub fn is_live(&self) -> bool {
        self.publishes
    }

    /// The ticks at or after `since_s` (s since the epoch), oldest first; the last
    /// [`TRAIL_S`] at most.
    pub fn trail(&self, since_s: f64) -> Vec<TickSummary> {
        self.trail
            .lock()
            .map(|t| t.iter().filter(|x| x.t_s >= since_s).copied().collect())
            .unwrap_or_default()
    }

    /// Total power of the last tick, W (for progress displays).
    pub fn live_power_w(&self) -> Option<f64> {
        let p = f64::from_bits(self.live_power.load(Ordering::Relaxed));
        p.is_finite().then_some(p)
    }

    /// Stops sampling (after a final sample) and returns the recording and the sensors;
    /// an error when the sampler died, since its recording died with it.
    pub fn finish(mut self) -> Result<Recording, MeterError> {
        self.stop_thread()
    }

    /// Stops sampling and returns the recording.
    pub fn stop(self) -> Result<Telemetry, MeterError> {
        self.finish().map(|(t, _)| t)
    }

    fn stop_thread(&mut self) -> Result<Recording, MeterError> {
        let Some(thread) = self.thread.take() else {
            return Err(MeterError::SamplerDied("already stopped".into()));
        };
        self.stop.store(true, Ordering::Release);
        thread.thread().unpark();
        thread.join().map_err(|payload| {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a sensor panicked".into());
            MeterError::SamplerDied(why)
        })
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop_thread();
        }
    }
}

struct Ticker<'a> {
    sensors: Vec<Box<dyn Sensor>>,
    series: Vec<Series>,
    last_energy: Vec<Option<(f64, f64)>>,
    epoch: Instant,
    live: &'a AtomicU64,
    trail: &'a Mutex<VecDeque<TickSummary>>,
    /// Each domain's running figures, for a live board.
    publisher: Option<Publisher>,
    /// The last tick's time, s since the epoch.
    last_t_s: f64,
}

impl Ticker<'_> {
    /// Puts the running figures on the board; `wait`: even if a reader holds it.
    fn publish(&self, wait: bool) {
        if let Some(p) = &self.publisher {
            p.publish(self.last_t_s, wait);
        }
    }

    fn sample(&mut self, detail: bool) {
        let mut total = 0.0;
        let mut any = false;
        let mut tick = TickSummary {
            t_s: self.epoch.elapsed().as_secs_f64(),
            ..TickSummary::default()
        };
        for (i, ((sensor, series), last)) in self
            .sensors
            .iter_mut()
            .zip(self.series.iter_mut())
            .zip(self.last_energy.iter_mut())
            .enumerate()
        {
            let t = self.epoch.elapsed().as_secs_f64();
            match sensor.read(detail) {
                // A tick that brought nothing new (a polled BMC between polls) is no sample;
                // an empty row would also hold back the next reading's stamp below.
                Ok(r) if r == crate::sensor::Reading::default() => {}
                Ok(r) => {
                    // A polled source hands back an older value: stamp it when it held, but
                    // never before the series' last sample.
                    let at = match r.age_s {
                        Some(age) => (t - age).max(series.t_s.last().copied().unwrap_or(f64::MIN)),
                        None => t,
                    };
                    series.push(at, &r);
                    if sensor.domain().kind == DomainKind::Node {
                        // The node encloses the other domains: never added to their total.
                        if let Some(p) = self.publisher.as_mut() {
                            p.add(i, at, &r, r.power_w);
                        }
                        continue;
                    }
                    if let Some(c) = r.temperature_c {
                        tick.temperature_c = Some(tick.temperature_c.map_or(c, |h| h.max(c)));
                    }
                    if let Some(b) = r.throttle_reasons {
                        tick.throttle_reasons = Some(tick.throttle_reasons.unwrap_or(0) | b);
                    }
                    let power = r.power_w.or_else(|| {
                        let e = r.energy_j?;
                        let (t0, e0) = last.replace((t, e))?;
                        (t > t0).then(|| (e - e0) / (t - t0))
                    });
                    if let Some(p) = self.publisher.as_mut() {
                        p.add(i, at, &r, power);
                    }
                    if let Some(p) = power {
                        total += p;
                        any = true;
                    }
                }
                Err(e) => {
                    series.errors += 1;
                    if series.first_error.is_none() {
                        series.first_error = Some(e.to_string());
                    }
                }
            }
        }
        if any {
            self.live.store(total.to_bits(), Ordering::Relaxed);
            tick.power_w = Some(total);
        }
        self.last_t_s = tick.t_s;
        self.publish(false);
        if let Ok(mut trail) = self.trail.lock() {
            while trail.front().is_some_and(|x| x.t_s < tick.t_s - TRAIL_S) {
                trail.pop_front();
            }
            trail.push_back(tick);
        }
    }
}

/// What the sampler shares: live power, the trail, and the live board.
type Shared<'a> = (
    &'a AtomicU64,
    &'a Mutex<VecDeque<TickSummary>>,
    Option<LiveBoard>,
);

fn run(
    sensors: Vec<Box<dyn Sensor>>,
    config: MeterConfig,
    epoch: Instant,
    stop: &AtomicBool,
    (live, trail, board): Shared<'_>,
    ready: &std::sync::mpsc::SyncSender<()>,
) -> Recording {
    let mut sensors = sensors;
    let series: Vec<Series> = sensors
        .iter_mut()
        .map(|s| {
            let mut se = Series::new(s.domain().clone(), s.kind(), s.has_counter(), s.has_power());
            se.notes = s.notes();
            // A node source's period is what it shows while sampling (seconds, not the
            // budget's milliseconds).
            if !config.update_period_budget.is_zero() && s.domain().kind != DomainKind::Node {
                se.update_period_s =
                    crate::update_period::measure(s.as_mut(), config.update_period_budget);
            }
            se
        })
        .collect();
    let n = sensors.len();
    let publisher = board.map(|b| {
        Publisher::start(
            b,
            sensors
                .iter()
                .map(|s| (s.domain().name.as_str(), s.domain().kind)),
        )
    });
    let mut ticker = Ticker {
        sensors,
        series,
        last_energy: vec![None; n],
        epoch,
        live,
        trail,
        publisher,
        last_t_s: 0.0,
    };
    let interval = tick_interval(config.interval, &ticker.sensors);
    let detail_every = (config.detail_interval.as_secs_f64() / interval.as_secs_f64())
        .round()
        .max(1.0) as u64;
    let mut stats = SamplerStats {
        interval_s: interval.as_secs_f64(),
        requested_interval_s: config.interval.as_secs_f64(),
        ..SamplerStats::default()
    };
    let mut next = Instant::now();
    let mut last_tick: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if let Some(prev) = last_tick {
            let gap = now.duration_since(prev).as_secs_f64();
            stats.max_gap_s = stats.max_gap_s.max(gap);
            if gap > 2.0 * stats.interval_s {
                stats.long_gaps += 1;
            }
        }
        last_tick = Some(now);
        ticker.sample(stats.ticks.is_multiple_of(detail_every));
        if stats.ticks == 0 {
            let _ = ready.try_send(());
        }
        stats.ticks += 1;
        next += interval;
        let now = Instant::now();
        if now > next {
            // Behind schedule (the thread was not scheduled in time): count it, and restart
            // the schedule from now instead of sampling in a burst to catch up.
            if now.duration_since(next) > interval {
                stats.late_ticks += 1;
            }
            next = now;
        }
        // park_timeout is the cheapest wait that stop() can also cut short (unpark); it may
        // return early, so wait until the deadline or the stop flag.
        loop {
            if stop.load(Ordering::Acquire) {
                break;
            }
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::park_timeout(left);
        }
        if stop.load(Ordering::Acquire) {
            ticker.sample(true);
            stats.ticks += 1;
            // The final figures must reach the board even if a reader held it just now.
            ticker.publish(true);
            break;
        }
    }
    stats.thread_cpu_s = thread_cpu_s();
    let last_tick_s = ticker.epoch.elapsed().as_secs_f64();
    for (sensor, series) in ticker.sensors.iter().zip(ticker.series.iter_mut()) {
        if let Some(p) = sensor.observed_update_period_s() {
            series.update_period_s = Some(p);
        }
        if series.domain.kind == DomainKind::Node {
            hold_to_the_end(series, last_tick_s);
        }
    }
    let start_s = ticker
        .series
        .iter()
        .filter_map(|s| s.t_s.first().copied())
        .reduce(f64::min)
        .unwrap_or(0.0);
    let end_s = ticker
        .series
        .iter()
        .filter_map(|s| s.t_s.last().copied())
        .reduce(f64::max)
        .unwrap_or(0.0);
    (
        Telemetry {
            series: ticker.series,
            stats,
            start_s,
            end_s,
        },
        ticker.sensors,
    )
}

/// Longest tick the pace of slow sensors may set: the trail, live power and the stop's
/// final sample stay responsive.
const MAX_TICK: Duration = Duration::from_secs(1);

/// The interval the sampler ticks at: the one asked for, unless every sensor changes more
/// slowly (the CPU estimate reads `/proc/stat` every 100 ms; a polled BMC once a second);
/// then the pace of the fastest of them, so a tick never wakes to find nothing new. RAPL,
/// NVML and amdgpu keep the asked interval.
fn tick_interval(asked: Duration, sensors: &[Box<dyn Sensor>]) -> Duration {
    let fastest = sensors
        .iter()
        .map(|s| s.changes_every().unwrap_or(Duration::ZERO))
        .min();
    match fastest {
        Some(f) if f > asked => f.min(MAX_TICK).max(asked),
        _ => asked,
    }
}

/// A polled node source's last reading held to the end of the recording: the recording
/// usually stops between two polls, and without it the time after the last poll would count
/// no energy at all. Holding is the best estimate there is; the edge bound (a period of power)
/// covers it.
fn hold_to_the_end(series: &mut Series, end_s: f64) {
    let last = series
        .t_s
        .iter()
        .zip(&series.power_w)
        .rev()
        .find(|(_, p)| p.is_finite())
        .map(|(t, p)| (*t, *p));
    if let Some((t, p)) = last
        && t < end_s
    {
        series.push(
            end_s,
            &crate::sensor::Reading {
                power_w: Some(p),
                ..crate::sensor::Reading::default()
            },
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::sensor::{Domain, DomainKind, Reading, SensorError, SensorKind};

    /// A sensor whose power is 50 W and whose counter follows the clock exactly.
    struct Clocked {
        domain: Domain,
        epoch: Instant,
        reads: u32,
        fail_every: u32,
        /// Panic on this read (a driver returning garbage); 0: never.
        die_after: u32,
    }

    impl Sensor for Clocked {
        fn domain(&self) -> &Domain {
            &self.domain
        }
        fn kind(&self) -> SensorKind {
            SensorKind::Nvml
        }
        fn has_counter(&self) -> bool {
            true
        }
        fn has_power(&self) -> bool {
            true
        }
        fn read(&mut self, detail: bool) -> Result<Reading, SensorError> {
            self.reads += 1;
            assert!(
                self.die_after == 0 || self.reads < self.die_after,
                "driver returned garbage"
            );
            if self.fail_every > 0 && self.reads.is_multiple_of(self.fail_every) {
                return Err(SensorError::Nvml("transient".into()));
            }
            Ok(Reading {
                energy_j: Some(50.0 * self.epoch.elapsed().as_secs_f64()),
                power_w: Some(50.0),
                temperature_c: detail.then_some(40.0),
                ..Reading::default()
            })
        }
    }

    fn clocked_sensor(epoch: Instant, fail_every: u32) -> Clocked {
        Clocked {
            domain: Domain {
                name: "gpu0".into(),
                kind: DomainKind::Gpu,
                index: 0,
                device: "test".into(),
            },
            epoch,
            reads: 0,
            fail_every,
            die_after: 0,
        }
    }

    fn clocked(epoch: Instant, fail_every: u32) -> Box<dyn Sensor> {
        Box::new(clocked_sensor(epoch, fail_every))
    }

    #[test]
    fn samples_at_the_interval_and_stops_with_a_final_sample() {
        let epoch = Instant::now();
        let cfg = MeterConfig {
            interval: Duration::from_millis(10),
            detail_interval: Duration::from_millis(50),
            ..MeterConfig::default()
        };
        let m = Meter::start(vec![clocked(epoch, 0)], cfg, epoch).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(m.live_power_w().is_some_and(|p| (p - 50.0).abs() < 1e-9));
        let stopped_at = epoch.elapsed().as_secs_f64();
        let t = m.stop().unwrap();
        let s = &t.series[0];
        assert!(s.len() >= 15, "{} samples in 300 ms at 10 ms", s.len());
        assert!((t.end_s - stopped_at).abs() < 0.05, "final sample at stop");
        // Detail fields every 5th tick (and in the final sample).
        let detailed = s.temperature_c.iter().filter(|v| !v.is_nan()).count();
        assert!(
            detailed >= 3 && detailed <= s.len() / 4 + 2,
            "{detailed} of {}",
            s.len()
        );
        // The counter reads the clock inside read(), microseconds after the sample's stamp.
        let w = t.total_energy();
        let want = 50.0 * (t.end_s - t.start_s);
        assert!(
            (w.domains[0].energy_j - want).abs() / want < 1e-3,
            "{} vs {want}",
            w.domains[0].energy_j
        );
    }

    /// The running figures on the board follow the recording: the counter's rise since the
    /// meter started, and the power read, tick by tick.
    #[test]
    fn a_live_board_carries_the_running_energy_of_each_domain() {
        let epoch = Instant::now();
        let cfg = MeterConfig {
            interval: Duration::from_millis(10),
            ..MeterConfig::default()
        };
        let board = LiveBoard::new();
        let m =
            Meter::start_live(vec![clocked(epoch, 0)], cfg, epoch, Some(board.clone())).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let mid = board.snapshot().unwrap();
        let t = m.stop().unwrap();
        let last = board.snapshot().unwrap();
        assert_eq!((mid.meter, mid.domains.len()), (1, 1));
        let d = &last.domains[0];
        assert_eq!((d.name.as_str(), d.power_w), ("gpu0", Some(50.0)));
        assert!(mid.domains[0].energy_j > 0.0 && mid.domains[0].energy_j <= d.energy_j);
        // The final tick is published: the running figure is the recording's energy.
        let recorded = t.total_energy().domains[0].energy_j;
        assert!(
            (d.energy_j - recorded).abs() < 1e-9,
            "{} vs {recorded}",
            d.energy_j
        );
        // A second meter on the board starts again from zero, under its own number.
        let m =
            Meter::start_live(vec![clocked(epoch, 0)], cfg, epoch, Some(board.clone())).unwrap();
        let s = board.snapshot().unwrap();
        drop(m);
        assert_eq!(s.meter, 2);
        assert!(s.domains[0].energy_j < d.energy_j);
    }

    /// A sensor whose reading moves no faster than every 100 ms (as the CPU estimate).
    struct Slow(Domain, u32);

    impl Sensor for Slow {
        fn domain(&self) -> &Domain {
            &self.0
        }
        fn kind(&self) -> SensorKind {
            SensorKind::Estimate
        }
        fn has_counter(&self) -> bool {
            false
        }
        fn has_power(&self) -> bool {
            true
        }
        fn read(&mut self, _: bool) -> Result<Reading, SensorError> {
            self.1 += 1;
            Ok(Reading {
                power_w: Some(10.0),
                ..Reading::default()
            })
        }
        fn changes_every(&self) -> Option<Duration> {
            Some(Duration::from_millis(100))
        }
    }

    #[test]
    fn the_sampler_ticks_no_faster_than_its_fastest_sensor_changes() {
        let slow = || {
            Box::new(Slow(
                Domain {
                    name: "package-0".into(),
                    kind: DomainKind::CpuPackage,
                    index: 0,
                    device: "estimate".into(),
                },
                0,
            )) as Box<dyn Sensor>
        };
        let cfg = MeterConfig {
            interval: Duration::from_millis(10),
            ..MeterConfig::default()
        };
        let epoch = Instant::now();
        let t = Meter::start(vec![slow()], cfg, epoch)
            .unwrap()
            .stop_after(Duration::from_millis(500));
        assert!((t.stats.interval_s - 0.1).abs() < 1e-9);
        assert!((t.stats.requested_interval_s - 0.01).abs() < 1e-9);
        // ~5 ticks and the final one, not ~50: derived from the time the recording took.
        let span = t.end_s - t.start_s;
        let most = (span / 0.1).ceil() as u64 + 2;
        assert!(t.stats.ticks <= most, "{} ticks in {span} s", t.stats.ticks);
        // A hardware sensor beside it keeps the asked pace.
        let t = Meter::start(vec![slow(), clocked(epoch, 0)], cfg, epoch)
            .unwrap()
            .stop_after(Duration::from_millis(300));
        assert!((t.stats.interval_s - 0.01).abs() < 1e-9);
    }

    impl Meter {
        fn stop_after(self, d: Duration) -> Telemetry {
            std::thread::sleep(d);
            self.stop().unwrap()
        }
    }

    #[test]
    fn read_errors_are_counted_not_fatal() {
        let epoch = Instant::now();
        let cfg = MeterConfig {
            interval: Duration::from_millis(5),
            ..MeterConfig::default()
        };
        let m = Meter::start(vec![clocked(epoch, 3)], cfg, epoch).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let t = m.stop().unwrap();
        assert!(t.series[0].errors > 0);
        assert_eq!(t.series[0].first_error.as_deref(), Some("NVML: transient"));
    }

    #[test]
    fn interval_must_fit_the_counter() {
        struct Wrapping(Domain);
        impl Sensor for Wrapping {
            fn domain(&self) -> &Domain {
                &self.0
            }
            fn kind(&self) -> SensorKind {
                SensorKind::Rapl
            }
            fn has_counter(&self) -> bool {
                true
            }
            fn has_power(&self) -> bool {
                false
            }
            fn read(&mut self, _: bool) -> Result<Reading, SensorError> {
                Ok(Reading::default())
            }
            fn max_read_interval(&self) -> Option<Duration> {
                Some(Duration::from_secs(1))
            }
        }
        let d = Domain {
            name: "package-0".into(),
            kind: DomainKind::CpuPackage,
            index: 0,
            device: "t".into(),
        };
        let cfg = MeterConfig {
            interval: Duration::from_secs(2),
            ..MeterConfig::default()
        };
        let e = Meter::start(vec![Box::new(Wrapping(d))], cfg, Instant::now())
            .err()
            .unwrap();
        assert!(e.to_string().contains("too long for package-0"));
    }

    #[test]
    fn a_sampler_that_dies_is_an_error_not_an_empty_recording() {
        let doomed = Box::new(Clocked {
            die_after: 3,
            ..clocked_sensor(Instant::now(), 0)
        });
        let cfg = MeterConfig {
            interval: Duration::from_millis(5),
            ..MeterConfig::default()
        };
        let m = Meter::start(vec![doomed], cfg, Instant::now()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let e = m.stop().err().unwrap();
        assert!(matches!(e, MeterError::SamplerDied(_)));
        assert!(e.to_string().contains("driver returned garbage"), "{e}");
    }
}
