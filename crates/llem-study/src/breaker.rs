//! The circuit breaker: closed → open after N failures in a row → (cooldown) → half-open probe →
//! closed on success, abort on failure. The runner sleeps the cooldown; this only decides.

/// Breaker state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Normal operation.
    Closed,
    /// Tripped; the runner cools down, then calls [`CircuitBreaker::start_probe`].
    Open,
    /// One probe cell is running.
    HalfOpen,
}

/// What the runner does after a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go on with the next cell.
    Continue,
    /// Threshold reached: cool down, then run one probe cell.
    Trip,
    /// Stop the study; the remaining cells are skipped.
    Abort,
}

/// Counts consecutive failures against `max_consecutive_failures`.
#[derive(Clone, Debug)]
pub struct CircuitBreaker {
    max_failures: u32,
    consecutive: u32,
    state: BreakerState,
}

impl CircuitBreaker {
    /// `max_failures` 0 disables the breaker; 1 aborts at the first failure (fail fast).
    pub fn new(max_failures: u32) -> CircuitBreaker {
        CircuitBreaker {
            max_failures,
            consecutive: 0,
            state: BreakerState::Closed,
        }
    }

    /// Current state.
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Failures in a row so far.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive
    }

    /// A cell completed: the breaker closes (a successful probe closes it too).
    pub fn record_success(&mut self) {
        self.state = BreakerState::Closed;
        self.consecutive = 0;
    }

    /// A cell failed.
    pub fn record_failure(&mut self) -> Verdict {
        if self.max_failures == 0 {
            return Verdict::Continue;
        }
        self.consecutive += 1;
        match self.state {
            BreakerState::HalfOpen => Verdict::Abort,
            // Fail fast: no cooldown, no probe.
            _ if self.max_failures == 1 => Verdict::Abort,
            _ if self.consecutive >= self.max_failures => {
                self.state = BreakerState::Open;
                Verdict::Trip
            }
            _ => Verdict::Continue,
        }
    }

    /// After the cooldown: the next cell is the probe.
    pub fn start_probe(&mut self) {
        if self.state == BreakerState::Open {
            self.state = BreakerState::HalfOpen;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trips_after_n_then_probe_closes_or_aborts() {
        let mut b = CircuitBreaker::new(3);
        assert_eq!(b.record_failure(), Verdict::Continue);
        assert_eq!(b.record_failure(), Verdict::Continue);
        assert_eq!(b.record_failure(), Verdict::Trip);
        assert_eq!(b.state(), BreakerState::Open);
        b.start_probe();
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.record_success();
        assert_eq!(
            (b.state(), b.consecutive_failures()),
            (BreakerState::Closed, 0)
        );
        // Counting starts again from zero.
        assert_eq!(b.record_failure(), Verdict::Continue);
        assert_eq!(b.record_failure(), Verdict::Continue);
        assert_eq!(b.record_failure(), Verdict::Trip);
        b.start_probe();
        assert_eq!(b.record_failure(), Verdict::Abort);
    }

    #[test]
    fn a_success_resets_the_count() {
        let mut b = CircuitBreaker::new(2);
        assert_eq!(b.record_failure(), Verdict::Continue);
        b.record_success();
        assert_eq!(b.record_failure(), Verdict::Continue);
        assert_eq!(b.record_failure(), Verdict::Trip);
    }

    #[test]
    fn zero_disables_and_one_fails_fast() {
        let mut off = CircuitBreaker::new(0);
        for _ in 0..100 {
            assert_eq!(off.record_failure(), Verdict::Continue);
        }
        let mut fast = CircuitBreaker::new(1);
        assert_eq!(fast.record_failure(), Verdict::Abort);
    }
}
