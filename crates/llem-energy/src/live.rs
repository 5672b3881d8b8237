//! What a running sampler publishes for live exports (Prometheus, OTLP): each domain's energy
//! since the meter started and its latest power. The sampler never waits for a reader: it
//! publishes with `try_lock` and skips a tick a reader holds (its final tick excepted) (the next tick carries the same
//! running totals), so an exporter cannot slow it.

use std::sync::{Arc, Mutex};

use crate::sensor::{DomainKind, Reading};

/// One domain's running figures.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveDomain {
    /// `gpu0`, `package-0`, `dram-0`, `node`.
    pub name: String,
    /// Its kind.
    pub kind: DomainKind,
    /// Energy since the meter started, J: the counter's rise where the domain has one, else
    /// its power integrated (trapezoids between samples).
    pub energy_j: f64,
    /// The latest power, W (a counter's rise over the last tick where no power is read).
    pub power_w: Option<f64>,
}

/// The latest figures of one meter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveSnapshot {
    /// Which meter of this board published them (1 for the first started): totals restart
    /// at 0 with each meter, so a reader adds the previous meter's last totals to keep a
    /// counter monotone.
    pub meter: u64,
    /// When, s since the meter's epoch.
    pub t_s: f64,
    /// Every domain, in the meter's order.
    pub domains: Vec<LiveDomain>,
}

/// Shared between the meters that publish and the exporters that read.
#[derive(Clone, Debug, Default)]
pub struct LiveBoard(Arc<Mutex<LiveSnapshot>>);

impl LiveBoard {
    /// An empty board.
    pub fn new() -> LiveBoard {
        LiveBoard::default()
    }

    /// The latest figures; `None` before any meter published.
    pub fn snapshot(&self) -> Option<LiveSnapshot> {
        let s = self.0.lock().ok()?;
        (s.meter > 0).then(|| s.clone())
    }

    /// A meter starts: its number.
    pub(crate) fn begin(&self) -> u64 {
        match self.0.lock() {
            Ok(mut s) => {
                s.meter += 1;
                s.domains.clear();
                s.meter
            }
            Err(_) => 0,
        }
    }

    /// Publishes the figures of meter `meter`; unless `wait`, only when no reader holds the
    /// board (`false` then).
    pub(crate) fn publish(&self, meter: u64, t_s: f64, running: &[Running], wait: bool) -> bool {
        let guard = if wait {
            self.0.lock().ok()
        } else {
            self.0.try_lock().ok()
        };
        match guard {
            Some(mut s) if s.meter == meter => {
                s.t_s = t_s;
                // Only the figures change between ticks: the names are copied once per meter.
                if s.domains.len() == running.len() {
                    for (to, from) in s.domains.iter_mut().zip(running) {
                        to.energy_j = from.figure.energy_j;
                        to.power_w = from.figure.power_w;
                    }
                } else {
                    s.domains = running.iter().map(|r| r.figure.clone()).collect();
                }
                true
            }
            _ => false,
        }
    }
}

/// A meter's side of a board: its number there and each domain's running figures.
#[derive(Debug)]
pub(crate) struct Publisher {
    board: LiveBoard,
    meter: u64,
    running: Vec<Running>,
}

impl Publisher {
    /// A new meter on `board` over `domains`, in the meter's order.
    pub(crate) fn start<'a>(
        board: LiveBoard,
        domains: impl Iterator<Item = (&'a str, DomainKind)>,
    ) -> Publisher {
        Publisher {
            meter: board.begin(),
            board,
            running: domains
                .map(|(name, kind)| Running::new(name, kind))
                .collect(),
        }
    }

    /// Domain `i` sampled at `t_s` (see [`Running::add`]).
    pub(crate) fn add(&mut self, i: usize, t_s: f64, r: &Reading, power_w: Option<f64>) {
        if let Some(run) = self.running.get_mut(i) {
            run.add(t_s, r, power_w);
        }
    }

    /// Puts the figures on the board as of `t_s`; `wait`: even if a reader holds it.
    pub(crate) fn publish(&self, t_s: f64, wait: bool) {
        self.board.publish(self.meter, t_s, &self.running, wait);
    }
}

/// A domain's running state in the sampler.
#[derive(Clone, Debug)]
pub(crate) struct Running {
    figure: LiveDomain,
    first_counter_j: Option<f64>,
    last_power: Option<(f64, f64)>,
}

impl Running {
    /// A domain before its first sample.
    pub(crate) fn new(name: &str, kind: DomainKind) -> Running {
        Running {
            figure: LiveDomain {
                name: name.to_string(),
                kind,
                energy_j: 0.0,
                power_w: None,
            },
            first_counter_j: None,
            last_power: None,
        }
    }

    /// Takes a sample at `t_s`; `power_w` is the power the sampler derived for it (the
    /// reading's, or the counter's rise over the tick).
    pub(crate) fn add(&mut self, t_s: f64, r: &Reading, power_w: Option<f64>) {
        if let Some(e) = r.energy_j {
            let first = *self.first_counter_j.get_or_insert(e);
            self.figure.energy_j = (e - first).max(0.0);
        } else if let Some(p) = power_w
            && let Some((t0, p0)) = self.last_power
            && t_s > t0
        {
            self.figure.energy_j += (p + p0) / 2.0 * (t_s - t0);
        }
        if let Some(p) = power_w {
            self.last_power = Some((t_s, p));
            self.figure.power_w = Some(p);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn counters_rise_from_zero_and_power_is_integrated() {
        let mut counter = Running::new("package-0", DomainKind::CpuPackage);
        let mut powered = Running::new("gpu0", DomainKind::Gpu);
        for (i, t) in [0.0, 0.5, 1.5].iter().enumerate() {
            let r = Reading {
                energy_j: Some(100.0 + 20.0 * t),
                ..Reading::default()
            };
            counter.add(*t, &r, (i > 0).then_some(20.0));
            powered.add(*t, &Reading::default(), Some(100.0 + 100.0 * t));
        }
        assert_eq!(counter.figure.energy_j, 30.0);
        // Trapezoids of a power ramp 100 -> 250 W over 1.5 s: the exact integral.
        assert!((powered.figure.energy_j - 262.5).abs() < 1e-9);
        assert_eq!(powered.figure.power_w, Some(250.0));
    }

    #[test]
    fn a_board_publishes_only_for_its_current_meter() {
        let board = LiveBoard::new();
        assert!(board.snapshot().is_none());
        let first = board.begin();
        let d = [Running::new("gpu0", DomainKind::Gpu)];
        assert!(board.publish(first, 1.0, &d, false));
        let second = board.begin();
        assert!(!board.publish(first, 2.0, &d, false));
        assert!(board.publish(second, 0.5, &d, true));
        let s = board.snapshot().unwrap();
        assert_eq!((s.meter, s.t_s, s.domains.len()), (2, 0.5, 1));
    }
}
