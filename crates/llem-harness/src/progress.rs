//! What the harness tells a progress display; the binary renders it (bars, JSON lines).

/// Lifecycle phases, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Checks before anything is measured.
    Preflight,
    /// Idle power.
    Baseline,
    /// Model load and context allocation.
    Load,
    /// Warmup iterations.
    Warmup,
    /// Waiting for temperatures to settle.
    ThermalFloor,
    /// The measured workload.
    Measure,
    /// Writing the artefacts.
    Save,
}

impl Phase {
    /// Name for displays.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Preflight => "preflight",
            Phase::Baseline => "baseline",
            Phase::Load => "load",
            Phase::Warmup => "warmup",
            Phase::ThermalFloor => "thermal floor",
            Phase::Measure => "measure",
            Phase::Save => "save",
        }
    }
}

/// One progress event.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A phase begins; `total` units (requests, iterations, seconds) when known.
    Start {
        /// The phase.
        phase: Phase,
        /// Units of work.
        total: Option<u64>,
        /// What is happening.
        detail: String,
    },
    /// Work within the current phase.
    Advance {
        /// Units done so far.
        done: u64,
        /// Output tokens so far.
        tokens: u64,
        /// Seconds since the phase began.
        elapsed_s: f64,
        /// Power of the last sample, W.
        power_w: Option<f64>,
    },
    /// The current phase ended.
    Finish {
        /// The phase.
        phase: Phase,
        /// Summary line.
        summary: String,
    },
    /// A request of the measurement window finished.
    Request {
        /// Whether it succeeded.
        success: bool,
        /// Prompt tokens.
        input_tokens: u32,
        /// Generated tokens.
        output_tokens: u32,
        /// Time to first token, s.
        ttft_s: Option<f64>,
        /// Time per output token after the first, s.
        tpot_s: Option<f64>,
    },
    /// Something the user should know (a warning).
    Note(String),
    /// A serving engine's server was started: its process group and container, which
    /// whoever supervises this process must stop if this process dies first.
    ServerStarted {
        /// Process group of the server (or of `docker run`).
        pgid: Option<u32>,
        /// Container name (runner docker).
        container: Option<String>,
    },
}

/// Receives progress events.
pub trait Progress {
    /// One event.
    fn event(&mut self, e: Event);
}

/// Ignores everything (`--quiet`, tests).
pub struct Silent;

impl Progress for Silent {
    fn event(&mut self, _: Event) {}
}
