//! Live metrics while llem runs: the sampler's energy and power per device, the requests'
//! tokens and latencies, the phase and the study's progress, served to Prometheus
//! (`--metrics-listen`), pushed over OTLP/HTTP (`--otlp-endpoint`) and to a Pushgateway
//! (`--metrics-push`, which a study's cells do each for themselves).
//!
//! One [`LiveMetrics`] lives in the process that owns the endpoint: `llem run` of one
//! experiment and `llem measure` (their sampler publishes on the [`LiveBoard`] here), or a
//! study's parent (its cells report their sampler's figures as `live` lines, relayed by
//! [`relay`]), so the endpoint stays up between cells and its counters never restart.
//! Names follow the OpenTelemetry semantic conventions where they exist (`hw.energy`,
//! `hw.power`, `hw.host.*`, `gen_ai.*`); llem's own carry `llem_`. Every series is
//! documented in docs/energy.md.

pub mod gateway;
mod histogram;
mod otlp;
mod prometheus;
mod push;
pub mod relay;
mod server;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use llem_energy::{LiveBoard, LiveSnapshot};
use llem_harness::Event;
use llem_study::{CellMessage, LiveFigure, StudyEvent};

pub use histogram::Histogram;
pub use push::Pusher;
pub use server::Server;

use crate::LiveError;

/// Where live metrics go: a Prometheus endpoint, an OTLP receiver, a Pushgateway.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveOptions {
    /// `--metrics-listen`: `PORT`, `:PORT`, `HOST:PORT` (loopback unless a host is named).
    pub listen: Option<String>,
    /// `--otlp-endpoint`: an `http://` URL of an OTLP/HTTP receiver (`/v1/metrics` added when
    /// the URL has no path).
    pub otlp_endpoint: Option<String>,
    /// Time between OTLP pushes (the SDKs' `OTEL_METRIC_EXPORT_INTERVAL`).
    pub otlp_interval: Duration,
    /// `--metrics-push`: an `http://` URL of a Prometheus Pushgateway the measuring process
    /// pushes to (a study's cells each push their own figures).
    pub push_gateway: Option<String>,
}

/// The OTLP push interval when none is given: 10 s, shorter than the SDKs' 60 s because a
/// cell lasts minutes.
pub const DEFAULT_OTLP_INTERVAL: Duration = Duration::from_secs(10);

impl LiveOptions {
    /// Whether any export is asked for.
    pub fn enabled(&self) -> bool {
        self.listen.is_some() || self.otlp_endpoint.is_some() || self.push_gateway.is_some()
    }
}

/// How often a study's cells report their running figures when live metrics are on.
pub const CELL_REPORT_INTERVAL: Duration = Duration::from_millis(500);

/// One device's energy counter, kept monotone across meters and cells.
#[derive(Clone, Debug)]
struct DomainCounter {
    kind: String,
    /// Energy of the meters before the current one, J.
    base_j: f64,
    /// The current meter's running energy, J.
    last_j: f64,
    /// Which meter `last_j` belongs to: (source, meter).
    meter: (u64, u64),
    power_w: Option<f64>,
}

/// Requests, tokens and latencies of one configuration.
#[derive(Clone, Debug)]
pub(crate) struct RequestStats {
    pub(crate) model: String,
    pub(crate) succeeded: u64,
    pub(crate) failed: u64,
    pub(crate) input_tokens: Histogram,
    pub(crate) output_tokens: Histogram,
    pub(crate) ttft_s: Histogram,
    pub(crate) tpot_s: Histogram,
}

impl RequestStats {
    fn new(model: &str) -> RequestStats {
        RequestStats {
            model: model.to_string(),
            succeeded: 0,
            failed: 0,
            input_tokens: Histogram::new(histogram::TOKEN_BOUNDS),
            output_tokens: Histogram::new(histogram::TOKEN_BOUNDS),
            ttft_s: Histogram::new(histogram::TTFT_BOUNDS_S),
            tpot_s: Histogram::new(histogram::TPOT_BOUNDS_S),
        }
    }
}

/// The running energy per output token of the measurement window in progress.
#[derive(Clone, Debug, Default)]
struct Window {
    /// Components' energy when the window opened, J.
    start_j: f64,
    /// Their power then, W.
    start_w: f64,
    /// Output tokens so far.
    tokens: u64,
    /// Components' energy now, J.
    now_j: f64,
    /// Their power now, W.
    now_w: f64,
}

impl Window {
    /// J/token and its bound: each end's energy may be read up to `staleness_s` late, so
    /// each may be off by its power over that time.
    fn per_token(&self, staleness_s: f64) -> Option<(f64, f64)> {
        (self.tokens > 0).then(|| {
            let n = self.tokens as f64;
            (
                (self.now_j - self.start_j) / n,
                (self.start_w + self.now_w) * staleness_s / n,
            )
        })
    }
}

/// Everything the exports show, as of the last update.
#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    /// `study`, `experiment`, `measure`, or `cell` (a cell pushing its own figures).
    pub(crate) run_kind: &'static str,
    /// The study's or experiment's name.
    pub(crate) name: String,
    pub(crate) cells_planned: u64,
    pub(crate) cells_completed: u64,
    pub(crate) cells_failed: u64,
    /// The configuration being measured: label, hash, model.
    pub(crate) config: Option<(String, String, String)>,
    pub(crate) phase: Option<String>,
    domains: BTreeMap<String, DomainCounter>,
    /// Which source reports energy now: 0 for this process's board, a cell's index else.
    source: u64,
    pub(crate) requests: BTreeMap<String, RequestStats>,
    window: Option<Window>,
    /// The last window's J/token and its bound by configuration label, kept after it closed.
    pub(crate) joules_per_token: BTreeMap<String, (f64, f64)>,
    /// How late an energy reading may be when an event arrives, s: one sampler tick in the
    /// process that samples, plus a report interval when it comes from a cell.
    staleness_s: f64,
    /// The model of each configuration hash of the plan.
    models: BTreeMap<String, String>,
}

/// One device's figures for the exports.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DeviceFigures {
    pub(crate) id: String,
    /// OpenTelemetry's `hw.type`: `gpu`, `cpu`, `memory`; `None` for the whole node.
    pub(crate) hw_type: Option<&'static str>,
    pub(crate) energy_j: f64,
    pub(crate) power_w: Option<f64>,
}

impl State {
    /// Every device, in name order.
    pub(crate) fn devices(&self) -> Vec<DeviceFigures> {
        self.domains
            .iter()
            .map(|(id, d)| DeviceFigures {
                id: id.clone(),
                hw_type: hw_type(&d.kind),
                energy_j: d.base_j + d.last_j,
                power_w: d.power_w,
            })
            .collect()
    }

    /// The components' (not the node's) energy so far, J, and their latest power, W.
    fn components(&self) -> (f64, f64) {
        self.domains
            .values()
            .filter(|d| d.kind != "node")
            .fold((0.0, 0.0), |(j, w), d| {
                (j + d.base_j + d.last_j, w + d.power_w.unwrap_or(0.0))
            })
    }

    /// The label of the configuration being measured (`-` before one is known).
    pub(crate) fn label(&self) -> String {
        self.config
            .as_ref()
            .map_or_else(|| "-".to_string(), |c| c.0.clone())
    }

    /// The running J/token of the open window, else the last closed one's, and its bound,
    /// by label.
    pub(crate) fn energy_per_token(&self) -> BTreeMap<String, (f64, f64)> {
        let mut out = self.joules_per_token.clone();
        if let Some(figure) = self
            .window
            .as_ref()
            .and_then(|w| w.per_token(self.staleness_s))
        {
            out.insert(self.label(), figure);
        }
        out
    }

    fn apply(
        &mut self,
        meter: u64,
        figures: impl Iterator<Item = (String, String, f64, Option<f64>)>,
    ) {
        let key = (self.source, meter);
        for (name, kind, energy_j, power_w) in figures {
            let d = self.domains.entry(name).or_insert_with(|| DomainCounter {
                kind: kind.clone(),
                base_j: 0.0,
                last_j: 0.0,
                meter: key,
                power_w: None,
            });
            if d.meter != key {
                // A new meter counts from zero: what the last one measured is kept.
                d.base_j += d.last_j;
                d.last_j = 0.0;
                d.meter = key;
            }
            d.last_j = energy_j.max(d.last_j);
            d.power_w = power_w;
        }
        let (now_j, now_w) = self.components();
        if let Some(w) = self.window.as_mut() {
            w.now_j = now_j;
            w.now_w = now_w;
        }
    }

    fn phase_started(&mut self, phase: &str) {
        self.phase = Some(phase.to_string());
        if phase == "measure" {
            let (j, w) = self.components();
            self.window = Some(Window {
                start_j: j,
                start_w: w,
                tokens: 0,
                now_j: j,
                now_w: w,
            });
        }
    }

    fn phase_done(&mut self, phase: &str) {
        if phase == "measure"
            && let Some(figure) = self
                .window
                .take()
                .and_then(|w| w.per_token(self.staleness_s))
        {
            self.joules_per_token.insert(self.label(), figure);
        }
    }

    fn advance(&mut self, tokens: u64) {
        if let Some(w) = self.window.as_mut() {
            w.tokens = tokens;
        }
    }

    fn request(
        &mut self,
        success: bool,
        (input, output): (u32, u32),
        ttft_s: Option<f64>,
        tpot_s: Option<f64>,
    ) {
        let label = self.label();
        let model = self
            .config
            .as_ref()
            .map_or("", |c| c.2.as_str())
            .to_string();
        let r = self
            .requests
            .entry(label)
            .or_insert_with(|| RequestStats::new(&model));
        if success {
            r.succeeded += 1;
            r.input_tokens.observe(f64::from(input));
            r.output_tokens.observe(f64::from(output));
            if let Some(t) = ttft_s {
                r.ttft_s.observe(t);
            }
            if let Some(t) = tpot_s {
                r.tpot_s.observe(t);
            }
        } else {
            r.failed += 1;
        }
    }
}

/// OpenTelemetry's `hw.type` of a domain kind; `None` for the node (`hw.host.*`).
fn hw_type(kind: &str) -> Option<&'static str> {
    match kind {
        "gpu" => Some("gpu"),
        "cpu_package" => Some("cpu"),
        "dram" => Some("memory"),
        _ => None,
    }
}

/// The live figures of this process, shared by whoever updates them and the exporters.
#[derive(Debug)]
pub struct LiveMetrics {
    state: Mutex<State>,
    /// The board this process's own sampler publishes on.
    board: LiveBoard,
    /// When the metrics started (OTLP's start time of its cumulative sums), ns since 1970.
    started_unix_ns: u128,
}

impl LiveMetrics {
    /// Metrics of a run of `kind` (`study`, `experiment`, `measure`, `cell`) named `name`.
    pub fn new(kind: &'static str, name: &str) -> Arc<LiveMetrics> {
        Arc::new(LiveMetrics {
            state: Mutex::new(State {
                run_kind: kind,
                name: name.to_string(),
                staleness_s: crate::options::DEFAULT_SAMPLING_INTERVAL.as_secs_f64(),
                ..State::default()
            }),
            board: LiveBoard::new(),
            started_unix_ns: unix_ns(),
        })
    }

    /// The board for this process's own sampler (a single experiment, `llem measure`).
    pub fn board(&self) -> LiveBoard {
        self.board.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state after taking in what this process's sampler published.
    pub(crate) fn current(&self) -> State {
        let snapshot = self.board.snapshot();
        let mut s = self.lock();
        if let Some(snap) = snapshot {
            apply_snapshot(&mut s, &snap);
        }
        s.clone()
    }

    pub(crate) fn started_unix_ns(&self) -> u128 {
        self.started_unix_ns
    }

    /// How late the energy it is told may be: the sampler's interval, plus the cells' report
    /// interval for a study.
    pub fn staleness(&self, late: Duration) {
        self.lock().staleness_s = late.as_secs_f64();
    }

    /// The plan a study runs: the model of each configuration.
    pub fn plan(&self, plan: &llem_config::StudyPlan) {
        let mut s = self.lock();
        for pc in &plan.configs {
            s.models.insert(pc.digest.short(), pc.config.model.clone());
        }
    }

    /// The configuration about to be measured (a single experiment's, or a cell's).
    pub fn configuration(&self, label: &str, config_hash: &str, model: &str) {
        self.lock().config = Some((label.into(), config_hash.into(), model.into()));
    }

    /// A harness progress event of this process's run.
    pub fn progress(&self, e: &Event) {
        // A phase's ends need the energy at that moment (the window's J/token); every other
        // figure is brought up to date when an exporter reads (`current`).
        let snapshot = matches!(e, Event::Start { .. } | Event::Finish { .. })
            .then(|| self.board.snapshot())
            .flatten();
        let mut s = self.lock();
        if let Some(snap) = snapshot {
            apply_snapshot(&mut s, &snap);
        }
        match e {
            Event::Start { phase, .. } => s.phase_started(phase.as_str()),
            Event::Finish { phase, .. } => s.phase_done(phase.as_str()),
            Event::Advance { tokens, .. } => s.advance(*tokens),
            Event::Request {
                success,
                input_tokens,
                output_tokens,
                ttft_s,
                tpot_s,
            } => s.request(*success, (*input_tokens, *output_tokens), *ttft_s, *tpot_s),
            Event::Note(_) | Event::ServerStarted { .. } => {}
        }
    }

    /// A study event of the study this process runs.
    pub fn study(&self, e: &StudyEvent<'_>) {
        let mut s = self.lock();
        match e {
            StudyEvent::Started { manifest, .. } | StudyEvent::CellFinished { manifest, .. } => {
                s.cells_planned = manifest.experiments.len() as u64;
                s.cells_completed = manifest.summary.completed as u64;
                s.cells_failed = manifest.summary.failed as u64;
                if matches!(e, StudyEvent::CellFinished { .. }) {
                    s.phase = None;
                    s.window = None;
                }
            }
            StudyEvent::CellStarted { entry, .. } => {
                s.source = entry.index as u64;
                let model = s
                    .models
                    .get(&entry.config_hash)
                    .cloned()
                    .unwrap_or_default();
                s.config = Some((
                    entry.config_summary.clone(),
                    entry.config_hash.clone(),
                    model,
                ));
                s.phase = None;
            }
            StudyEvent::Cell { message, .. } => match message {
                CellMessage::Live { meter, domains } => apply_figures(&mut s, *meter, domains),
                CellMessage::Phase { phase, .. } => s.phase_started(phase),
                CellMessage::PhaseDone { phase, .. } => s.phase_done(phase),
                CellMessage::Advance { tokens, .. } => s.advance(*tokens),
                CellMessage::Request {
                    success,
                    input_tokens,
                    output_tokens,
                    ttft_s,
                    tpot_s,
                } => s.request(*success, (*input_tokens, *output_tokens), *ttft_s, *tpot_s),
                _ => {}
            },
            StudyEvent::Waiting { .. } | StudyEvent::WaitLeft { .. } => {
                s.phase = Some("gap".into());
            }
            StudyEvent::Note(_) => {}
        }
    }
}

fn apply_snapshot(s: &mut State, snap: &LiveSnapshot) {
    s.apply(
        snap.meter,
        snap.domains.iter().map(|d| {
            (
                d.name.clone(),
                d.kind.as_str().to_string(),
                d.energy_j,
                d.power_w,
            )
        }),
    );
}

fn apply_figures(s: &mut State, meter: u64, domains: &[LiveFigure]) {
    s.apply(
        meter,
        domains
            .iter()
            .map(|d| (d.name.clone(), d.kind.clone(), d.energy_j, d.power_w)),
    );
}

/// Now, ns since 1970.
pub(crate) fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The exporters asked for, running until dropped.
pub struct LiveExports {
    /// The metrics they export.
    pub metrics: Arc<LiveMetrics>,
    /// The Prometheus endpoint, when asked for.
    pub server: Option<Server>,
    /// The OTLP pusher, when asked for.
    pub pusher: Option<Pusher>,
    /// The Pushgateway pusher, when asked for.
    pub gateway: Option<Pusher>,
}

impl LiveExports {
    /// Starts what `opts` asks for; `None` when it asks for nothing. `grouping` labels this
    /// process's group on a Pushgateway.
    pub fn start(
        opts: &LiveOptions,
        kind: &'static str,
        name: &str,
        grouping: &[(&str, String)],
    ) -> Result<Option<LiveExports>, LiveError> {
        if !opts.enabled() {
            return Ok(None);
        }
        let metrics = LiveMetrics::new(kind, name);
        let server = opts
            .listen
            .as_deref()
            .map(|a| Server::start(a, metrics.clone()))
            .transpose()?;
        let pusher = opts
            .otlp_endpoint
            .as_deref()
            .map(|u| otlp::start(u, opts.otlp_interval, metrics.clone()))
            .transpose()?;
        let gateway = opts
            .push_gateway
            .as_deref()
            .map(|u| gateway::start(u, gateway::PUSH_INTERVAL, metrics.clone(), grouping))
            .transpose()?;
        Ok(Some(LiveExports {
            metrics,
            server,
            pusher,
            gateway,
        }))
    }

    /// Sends the final figures (OTLP) and stops the exporters.
    pub fn finish(self) -> Vec<String> {
        let mut notes = Vec::new();
        for p in [self.pusher, self.gateway].into_iter().flatten() {
            notes.extend(p.finish());
        }
        drop(self.server);
        notes
    }
}

/// A progress display that also feeds the live metrics.
pub struct ProgressTee<'a> {
    /// The display.
    pub inner: &'a mut dyn llem_harness::Progress,
    /// The metrics.
    pub metrics: &'a LiveMetrics,
}

impl llem_harness::Progress for ProgressTee<'_> {
    fn event(&mut self, e: Event) {
        self.metrics.progress(&e);
        self.inner.event(e);
    }
}

/// A study observer that also feeds the live metrics.
pub struct ObserverTee<'a> {
    /// The observer.
    pub inner: &'a mut dyn llem_study::Observer,
    /// The metrics.
    pub metrics: &'a LiveMetrics,
}

impl llem_study::Observer for ObserverTee<'_> {
    fn event(&mut self, e: StudyEvent<'_>) {
        self.metrics.study(&e);
        self.inner.event(e);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn figures(j: f64) -> Vec<LiveFigure> {
        vec![
            LiveFigure {
                name: "gpu0".into(),
                kind: "gpu".into(),
                energy_j: j,
                power_w: Some(100.0),
            },
            LiveFigure {
                name: "node".into(),
                kind: "node".into(),
                energy_j: 3.0 * j,
                power_w: Some(300.0),
            },
        ]
    }

    /// Counters add up across meters and cells; a new meter restarting at zero never makes
    /// one go down; the node stays out of the components' J/token.
    #[test]
    fn counters_stay_monotone_across_meters_and_cells() {
        let mut s = State {
            source: 1,
            ..State::default()
        };
        apply_figures(&mut s, 1, &figures(5.0));
        apply_figures(&mut s, 1, &figures(8.0));
        s.config = Some(("a".into(), "h".into(), "m".into()));
        s.phase_started("measure");
        apply_figures(&mut s, 2, &figures(2.0));
        s.advance(4);
        let gpu = &s.devices()[0];
        assert_eq!((gpu.id.as_str(), gpu.energy_j), ("gpu0", 10.0));
        assert_eq!(s.devices()[1].hw_type, None);
        // 2 J over 4 tokens; both ends read up to 0.5 s late at 100 W: 25 J/token either way.
        s.staleness_s = 0.5;
        assert_eq!(s.energy_per_token()["a"], (0.5, 25.0));
        s.phase_done("measure");
        // The next cell's first meter is a new source: its 1 J adds to the 10 J.
        s.source = 2;
        apply_figures(&mut s, 1, &figures(1.0));
        assert_eq!(s.devices()[0].energy_j, 11.0);
        assert_eq!(
            s.energy_per_token()["a"],
            (0.5, 25.0),
            "kept after the window closed"
        );
    }
}
