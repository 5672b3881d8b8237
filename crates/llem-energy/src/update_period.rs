//! How often a sensor's energy counter moves, measured before sampling starts the way Zeus
//! infers NVML's: read it back to back and time the changes. Zeus takes the shortest interval
//! between two changes; one late update (a busy host) makes the interval after it short, so
//! the median interval is taken instead, which a single late update does not move.
//!
//! The period bounds what any window can resolve: a window edge falls somewhere between two
//! updates, so each edge is uncertain by up to one period of energy.

use std::time::{Duration, Instant};

use crate::sensor::Sensor;

/// Changes to see before stopping early (the first only starts the clock).
const CHANGES: usize = 11;

/// The counter's update period, s: the median time between two changes of its value in
/// back-to-back reads over at most `budget`; `None` for a sensor without a counter, one that
/// fails to read, or one that changed fewer than twice (a period longer than the budget).
pub fn measure(sensor: &mut dyn Sensor, budget: Duration) -> Option<f64> {
    if !sensor.has_counter() {
        return None;
    }
    let start = Instant::now();
    let mut last = sensor.read(false).ok()?.energy_j?;
    let mut changes: Vec<f64> = Vec::with_capacity(CHANGES);
    while start.elapsed() < budget && changes.len() < CHANGES {
        // A breath between reads: sysfs counters are cheap to read, and the period is
        // wanted to a tenth of a millisecond, not to the read's cost.
        std::thread::sleep(Duration::from_micros(50));
        let v = sensor.read(false).ok()?.energy_j?;
        if v != last {
            changes.push(start.elapsed().as_secs_f64());
            last = v;
        }
    }
    let mut gaps: Vec<f64> = changes
        .windows(2)
        .filter_map(|w| match w {
            [a, b] if b > a => Some(b - a),
            _ => None,
        })
        .collect();
    gaps.sort_by(f64::total_cmp);
    let n = gaps.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => gaps.get(n / 2).copied(),
        _ => Some((gaps.get(n / 2 - 1)? + gaps.get(n / 2)?) / 2.0),
    }
}
