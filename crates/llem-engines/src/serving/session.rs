//! The measured session of a serving run: requests sent on the traffic schedule, records
//! handed to the sink as they finish, `/metrics` scraped throughout, and a summary of what
//! was sent.

use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use llem_results::result::TrafficSummary;
use llem_results::{MetricSample, stats};

use super::ServerEngine;
use super::accounting::TimingMode;
use super::client::{self, Api, Clock, Finished, Prepared, Shared};
use super::prometheus;
use crate::engine::{EngineError, RequestSink, RunSummary, Session};
use crate::workload::traffic::TrafficPlan;
use crate::workload::{BatchingSpec, Workload};

/// Sends workloads to a running server.
pub(super) struct ServerSession<'a> {
    pub(super) engine: &'a ServerEngine,
    pub(super) batching: BatchingSpec,
}

/// What the summary needs of the finished requests; the records themselves go to the sink.
struct Tally {
    lags_ms: Vec<f64>,
    submits: Vec<f64>,
    succeeded: usize,
    failed: usize,
    mode: TimingMode,
    all_usage: bool,
    all_input_usage: bool,
    /// Successful requests that received more tokens than their `max_tokens`: how many, and
    /// the cap and tokens of the one that received the most.
    over_cap: (usize, u32, u32),
    /// Successful requests whose stream ended without `data: [DONE]`.
    without_done: usize,
    /// Successful requests asked for an exact length that generated fewer tokens.
    short: usize,
    /// Successful token-id requests whose prompt count (server's usage) differs from the
    /// ids sent, and how many such requests had a count at all.
    inexact_inputs: (usize, usize),
    /// Prompt tokens served from the prefix cache, summed over the requests that said.
    cached: Option<u64>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            lags_ms: Vec::new(),
            submits: Vec::new(),
            succeeded: 0,
            failed: 0,
            mode: TimingMode::TrueStreaming,
            all_usage: true,
            all_input_usage: true,
            over_cap: (0, 0, 0),
            without_done: 0,
            short: 0,
            inexact_inputs: (0, 0),
            cached: None,
        }
    }

    fn add(&mut self, f: &Finished) {
        self.mode = self.mode.max(f.mode);
        self.all_usage &= f.from_usage || !f.record.success;
        self.all_input_usage &= f.input_from_usage || !f.record.success;
        let r = &f.record;
        self.submits.push(r.submit_s);
        self.lags_ms
            .extend(r.scheduled_s.map(|s| (r.submit_s - s) * 1000.0));
        if r.success {
            self.succeeded += 1;
            if let Some(cap) = f.over_cap {
                let (n, worst_cap, most) = self.over_cap;
                self.over_cap = if r.output_tokens > most {
                    (n + 1, cap, r.output_tokens)
                } else {
                    (n + 1, worst_cap, most)
                };
            }
            if !f.saw_done {
                self.without_done += 1;
            }
            if f.exact_output.is_some_and(|n| r.output_tokens < n) {
                self.short += 1;
            }
            if let Some(n) = f.sent_prompt_tokens.filter(|_| f.input_from_usage) {
                self.inexact_inputs.0 += usize::from(r.input_tokens != n);
                self.inexact_inputs.1 += 1;
            }
            if let Some(c) = r.cached_input_tokens {
                *self.cached.get_or_insert(0) += u64::from(c);
            }
        } else {
            self.failed += 1;
        }
    }
}

impl ServerSession<'_> {
    /// Starts the scraper and waits (up to 5 s) for its first reading, taken before the first
    /// request is sent so counters (tokens generated, requests served) difference cleanly
    /// over the run.
    fn start_scraper(
        &self,
        clock: Clock,
        shared: &Arc<Shared>,
    ) -> Option<tokio::task::JoinHandle<Vec<MetricSample>>> {
        let e = self.engine;
        if !e.metrics_available {
            return None;
        }
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let handle = e.rt.spawn(scrape(
            e.http.clone(),
            format!("{}/metrics", e.endpoint.base_url),
            e.opts.scrape_interval,
            clock,
            shared.clone(),
            first_tx,
        ));
        let _ =
            e.rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), first_rx).await });
        Some(handle)
    }

    /// Hands finished requests to the sink until the dispatcher is done, the user cancels or
    /// the server dies; reports streamed tokens as they arrive.
    fn receive(
        &self,
        rx: &mpsc::Receiver<Finished>,
        shared: &Shared,
        sink: &mut dyn RequestSink,
        tally: &mut Tally,
    ) -> Result<(), EngineError> {
        let mut reported_tokens = 0u64;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(f) => {
                    tally.add(&f);
                    sink.on_done(f.record);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // Failed requests, or streams cut before `[DONE]`, may be a server that
                    // died: the run fails then, not only its requests.
                    let suspect = tally.failed > 0 || tally.without_done > 0;
                    let grace = Duration::from_secs(u64::from(suspect));
                    return match self.engine.server_died_within(grace) {
                        Some(died) => Err(EngineError::Inference(died)),
                        None => Ok(()),
                    };
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let tokens = shared.tokens.load(Ordering::Relaxed);
            if tokens > reported_tokens {
                let n = u32::try_from(tokens - reported_tokens).unwrap_or(u32::MAX);
                sink.on_tokens(u32::MAX, sink.now_s(), n);
                reported_tokens = tokens;
            }
            if sink.cancelled() {
                return Err(EngineError::Cancelled);
            }
            if let Some(died) = self.engine.server_died() {
                return Err(EngineError::Inference(died));
            }
        }
    }

    /// Warnings about what the server did not do or report.
    fn warnings(&self, workload: &Workload, tally: &Tally) -> Vec<String> {
        let e = self.engine;
        let mut warnings = Vec::new();
        if let Some(n) = workload
            .max_input_tokens
            .filter(|_| !e.spec.is_some_and(|s| s.truncates_prompts))
        {
            warnings.push(format!(
                "max_input_tokens = {n} is not enforced by the {} server (no per-request \
                 truncation in its API): prompts were sent whole",
                e.cfg.engine
            ));
        }
        if tally.succeeded > 0 && !tally.all_usage {
            warnings.push(
                "the server reported no token usage for some requests: their output tokens are \
                 llem's count of streamed chunks (one token per chunk)"
                    .into(),
            );
        }
        let (over, cap, most) = tally.over_cap;
        if over > 0 {
            warnings.push(format!(
                "{over} of {} requests received more tokens than their max_tokens (up to {most} \
                 against {cap}): the server did not honour the cap; their tokens are counted \
                 as received",
                tally.succeeded
            ));
        }
        if tally.without_done > 0 {
            warnings.push(format!(
                "{} of {} streams ended without `data: [DONE]`: the server closed them without \
                 the protocol's end marker, so their replies may be cut short",
                tally.without_done, tally.succeeded
            ));
        }
        if tally.short > 0 {
            warnings.push(format!(
                "{} of {} requests asked for an exact number of tokens (end of sequence ignored) \
                 generated fewer: the server stopped them early",
                tally.short, tally.succeeded
            ));
        }
        if tally.inexact_inputs.0 > 0 {
            warnings.push(format!(
                "{} of {} prompts sent as token ids were counted otherwise by the server: their \
                 input lengths are the server's, not the ones asked",
                tally.inexact_inputs.0, tally.inexact_inputs.1
            ));
        }
        if tally.succeeded > 0 && !tally.all_input_usage {
            warnings.push(
                "the server reported no prompt token counts for some requests: their input \
                 tokens are recorded as 0"
                    .into(),
            );
        }
        warnings
    }

    /// The traffic that was sent.
    fn traffic(&self, plan: &TrafficPlan, requests: &[Prepared], tally: Tally) -> TrafficSummary {
        let lags_ms = stats::sorted(tally.lags_ms);
        let submits = &tally.submits;
        let send_span = {
            let lo = submits.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = submits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (hi - lo).max(0.0)
        };
        let sent = submits.len();
        let p99 = stats::percentile(&lags_ms, 99.0);
        let trace = plan.replay.as_ref().map(|r| {
            let mut t = r.summary.clone();
            t.short_replies = u32::try_from(tally.short).unwrap_or(u32::MAX);
            t.inputs_inexact = (tally.inexact_inputs.1 > 0)
                .then(|| u32::try_from(tally.inexact_inputs.0).unwrap_or(u32::MAX));
            t.cached_prompt_tokens = tally.cached;
            t.kept_up = p99.is_none_or(|l| l <= t.late_threshold_ms);
            t
        });
        TrafficSummary {
            arrival: if trace.is_some() {
                "trace".into()
            } else if plan.conversations.is_some() {
                "conversations".into()
            } else {
                plan.arrival.to_string()
            },
            rate_qps: plan.rate_qps,
            burstiness: plan.burstiness,
            max_concurrency: plan.max_concurrency.map(std::num::NonZeroU32::get),
            seed: plan.seed,
            requests_sent: sent as u32,
            requests_failed: tally.failed as u32,
            achieved_rate_qps: (send_span > 0.0 && sent > 1).then(|| (sent - 1) as f64 / send_span),
            dispatch_lag_p50_ms: stats::percentile(&lags_ms, 50.0),
            dispatch_lag_p99_ms: p99,
            endpoint: llem_config::credentials::redact_url(&self.engine.endpoint.base_url)
                .into_owned(),
            api: if requests.iter().any(|r| r.api == Api::Chat) {
                "chat_completions".into()
            } else {
                "completions".into()
            },
            token_count_source: if tally.all_usage { "usage" } else { "client" }.into(),
            trace,
        }
    }
}

impl Session for ServerSession<'_> {
    fn run(
        &mut self,
        workload: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<RunSummary, EngineError> {
        let e = self.engine;
        let reset = e.reset_prefix_cache()?;
        let reset_warning = reset.warning;
        let reset = reset.done;
        let requests = Arc::new(super::request::prepare(
            &e.endpoint,
            e.spec,
            &e.cfg,
            workload,
        ));
        let plan = workload
            .traffic
            .clone()
            .unwrap_or_else(|| TrafficPlan::all_at_once(requests.len() as u32));
        let offsets = plan
            .offsets(requests.len())
            .map_err(|e| EngineError::Config(e.to_string()))?;
        let clock = Clock {
            epoch: Instant::now()
                .checked_sub(Duration::from_secs_f64(sink.now_s().max(0.0)))
                .unwrap_or_else(Instant::now),
        };
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::channel();
        let scraper = self.start_scraper(clock, &shared);
        let driver = e.rt.spawn(client::drive(client::Dispatch {
            http: e.http.clone(),
            endpoint: e.endpoint.clone(),
            requests: requests.clone(),
            plan: plan.clone(),
            offsets,
            clock,
            shared: shared.clone(),
            done: tx,
            sessions: super::request::prepare_sessions(e.spec, &e.cfg, workload).map(Arc::new),
        }));
        let mut tally = Tally::new();
        let outcome = self.receive(&rx, &shared, sink, &mut tally);
        shared.stop.store(true, Ordering::Relaxed);
        shared.stopped.notify_one();
        // Received to the end, the dispatcher has returned (its senders are gone): a panic
        // in it or in a request's task is a run with requests missing, so an error.
        let dispatched = if outcome.is_ok() {
            e.rt.block_on(driver)
                .map_err(client::join_reason)
                .and_then(|r| r)
                .map_err(|why| EngineError::Inference(format!("the request dispatcher: {why}")))
        } else {
            driver.abort();
            Ok(())
        };
        let samples = match scraper {
            Some(h) => e.rt.block_on(h).map_err(|j| {
                EngineError::Inference(format!(
                    "the metrics scraper died: {}",
                    client::join_reason(j)
                ))
            }),
            None => Ok(Vec::new()),
        };
        outcome?;
        dispatched?;
        let samples = samples?;
        let mut warnings = self.warnings(workload, &tally);
        warnings.extend(reset_warning);
        let latency_mode = Some(tally.mode.as_str());
        let traffic = self.traffic(&plan, &requests, tally);
        if let Some(t) = &traffic.trace {
            for (n, what, field) in [
                (t.inputs_capped, "prompts", "max_input_tokens"),
                (t.outputs_capped, "output lengths", "max_output_tokens"),
            ] {
                if n > 0 {
                    warnings.push(format!(
                        "{n} of the trace's {} {what} were cut to {field} (set it to null to \
                         replay them as the trace has them)",
                        t.requests
                    ));
                }
            }
        }
        if let Some(t) = traffic.trace.as_ref().filter(|t| !t.kept_up) {
            warnings.push(format!(
                "the client fell behind the trace: requests were sent {} ms late at the 99th \
                 percentile (median {} ms), past the {} ms a replay allows; its arrivals are \
                 not the trace's (replay a slower time_scale, or run llem on a less loaded host)",
                traffic
                    .dispatch_lag_p99_ms
                    .map_or("?".into(), |l| format!("{l:.1}")),
                traffic
                    .dispatch_lag_p50_ms
                    .map_or("?".into(), |l| format!("{l:.1}")),
                t.late_threshold_ms
            ));
        }
        Ok(RunSummary {
            warnings,
            latency_mode,
            server_metrics: samples,
            traffic: Some(traffic),
            prefix_cache_reset: reset,
            ..RunSummary::default()
        })
    }

    fn kv_cache_bytes(&self) -> Option<u64> {
        None
    }
    fn batching(&self) -> BatchingSpec {
        self.batching
    }
}

/// Wait before the last scrape of a run.
const FINAL_SCRAPE_SETTLE: Duration = Duration::from_millis(300);

/// Reads `/metrics` every `interval` until told to stop; returns every sample but
/// histogram buckets.
async fn scrape(
    http: reqwest::Client,
    url: String,
    interval: Duration,
    clock: Clock,
    shared: Arc<Shared>,
    first: tokio::sync::oneshot::Sender<()>,
) -> Vec<MetricSample> {
    let mut out = Vec::new();
    let mut first = Some(first);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shared.stopped.notified() => {}
        }
        let stop = shared.stop.load(Ordering::Relaxed);
        if stop {
            // Servers update their counters just after a request's last chunk: let the
            // end-of-run reading settle so counters difference exactly over the run.
            tokio::time::sleep(FINAL_SCRAPE_SETTLE).await;
        }
        let got = async {
            let r = http
                .get(&url)
                .timeout(interval.max(Duration::from_secs(2)))
                .send()
                .await
                .ok()?;
            r.text().await.ok()
        }
        .await;
        if let Some(body) = got {
            let t = clock.now();
            out.extend(
                prometheus::parse(&body)
                    .filter(|s| !prometheus::dropped(s.name))
                    .map(|s| MetricSample {
                        t_s: t,
                        metric: s.name.to_string(),
                        labels: s.labels.to_string(),
                        value: s.value,
                    }),
            );
        }
        if let Some(f) = first.take() {
            let _ = f.send(());
        }
        if stop {
            return out;
        }
    }
}
