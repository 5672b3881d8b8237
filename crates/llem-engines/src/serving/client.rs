//! The streaming OpenAI-compatible client and the dispatcher that sends a traffic schedule.
//!
//! Request bodies are serialised before the first send; each request task owns one chunk
//! buffer sized for its output limit, so streaming a token allocates nothing. Times are read
//! from one monotonic clock shared with the harness.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use llem_results::{FinishReason, RequestRecord};

use super::accounting::{self, ChunkObs, TimingMode};
use super::chunk;
use super::sse::SseFramer;
use crate::StreamError;
use crate::workload::traffic::TrafficPlan;

/// Which endpoint a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `/v1/completions` (a prompt).
    Completions,
    /// `/v1/chat/completions` (one user message).
    Chat,
}

impl Api {
    /// The path under the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
        }
    }
}

/// Where requests go and how the stream is asked for.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// `http://127.0.0.1:8000` (no trailing slash).
    pub base_url: String,
    /// Bearer token (from the environment; never written to results).
    pub api_key: Option<String>,
    /// `model` field of each request.
    pub model: String,
    /// Ask for `stream_options.continuous_usage_stats` (vLLM, SGLang).
    pub continuous_usage: bool,
    /// A request with no bytes for this long fails as stalled.
    pub stall_timeout: Duration,
}

/// One request, ready to send.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// Endpoint.
    pub api: Api,
    /// JSON body.
    pub body: Arc<Vec<u8>>,
    /// Output limit (null: until end of sequence or the context's end), for sizing buffers.
    pub max_tokens: Option<u32>,
    /// The prompt's length in tokens, when llem sent token ids (checked against the server's
    /// usage).
    pub prompt_tokens: Option<u32>,
    /// The request asks for exactly `max_tokens` (end of sequence ignored): a shorter reply
    /// is counted.
    pub exact_output: bool,
    /// Keep the reply's text (a conversation threads it into its next turn).
    pub keep_reply: bool,
}

/// Decoding fields of a request body.
#[derive(Clone, Debug, Default)]
pub struct BodyParams {
    /// `max_tokens`; left out of the body when null (the server then generates until end of
    /// sequence or the context's end, as the embedded engines do).
    pub max_tokens: Option<u32>,
    /// Standard sampling fields (`temperature`, `top_p`, `seed`).
    pub standard: Map<String, Value>,
    /// Engine extensions (`top_k`, `min_p`, `ignore_eos`, ...), sent only when set.
    pub extended: Map<String, Value>,
}

/// What a request asks the model to continue.
#[derive(Clone, Copy, Debug)]
pub enum PromptBody<'a> {
    /// Text (a chat request's user message, or a completion's prompt).
    Text(&'a str),
    /// Token ids of the server's vocabulary (completions only: OpenAI's `prompt` may be a
    /// list of ids, which llama-server and vLLM take as they are).
    Ids(&'a [u32]),
    /// A conversation so far, `(role, content)` in order (chat only).
    Messages(&'a [(&'static str, String)]),
}

/// Serialises one streaming request.
pub fn body(endpoint: &Endpoint, api: Api, prompt: PromptBody<'_>, p: &BodyParams) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("model".into(), Value::String(endpoint.model.clone()));
    match (api, prompt) {
        (_, PromptBody::Messages(history)) => {
            let messages: Vec<Value> = history
                .iter()
                .map(|(role, content)| json!({"role": role, "content": content}))
                .collect();
            m.insert("messages".into(), Value::Array(messages))
        }
        // Token ids are a completions prompt whatever the endpoint (chat has no such field);
        // request.rs sends them to completions only.
        (_, PromptBody::Ids(ids)) => m.insert("prompt".into(), json!(ids)),
        (Api::Completions, PromptBody::Text(t)) => m.insert("prompt".into(), json!(t)),
        (Api::Chat, PromptBody::Text(t)) => {
            m.insert("messages".into(), json!([{"role": "user", "content": t}]))
        }
    };
    if let Some(n) = p.max_tokens {
        m.insert("max_tokens".into(), json!(n));
    }
    m.insert("stream".into(), Value::Bool(true));
    let mut so = Map::new();
    so.insert("include_usage".into(), Value::Bool(true));
    if endpoint.continuous_usage {
        so.insert("continuous_usage_stats".into(), Value::Bool(true));
    }
    m.insert("stream_options".into(), Value::Object(so));
    m.extend(p.standard.clone());
    m.extend(p.extended.clone());
    serde_json::to_vec(&Value::Object(m)).unwrap_or_default()
}

/// Seconds on the harness's clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// The instant that is 0 s.
    pub epoch: Instant,
}

impl Clock {
    /// Now, s since the epoch.
    pub fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
    fn at(&self, t: tokio::time::Instant) -> f64 {
        t.into_std()
            .saturating_duration_since(self.epoch)
            .as_secs_f64()
    }
}

/// What a finished request reports to the run thread.
#[derive(Debug)]
pub struct Finished {
    /// The record.
    pub record: RequestRecord,
    /// How its token times were obtained.
    pub mode: TimingMode,
    /// Output count from the server's usage (else llem's chunk count).
    pub from_usage: bool,
    /// Prompt count from the server's usage.
    pub input_from_usage: bool,
    /// The stream closed with `data: [DONE]`, as the OpenAI protocol ends one.
    pub saw_done: bool,
    /// The `max_tokens` the request asked for, when it got more tokens than that.
    pub over_cap: Option<u32>,
    /// The exact length it asked for (end of sequence ignored), when it did.
    pub exact_output: Option<u32>,
    /// The prompt's length as llem sent it (token ids), when known.
    pub sent_prompt_tokens: Option<u32>,
    /// The reply's text, when the request kept it (a conversation's turn).
    pub reply: Option<String>,
}

/// Shared between the dispatcher and the run thread.
#[derive(Debug, Default)]
pub struct Shared {
    /// Output tokens streamed so far (progress).
    pub tokens: AtomicU64,
    /// Set to stop dispatching.
    pub stop: AtomicBool,
    /// Wakes the scraper when `stop` is set (its next tick may be far off).
    pub stopped: tokio::sync::Notify,
}

/// Everything the dispatcher needs for one run.
pub struct Dispatch {
    /// The HTTP client (its connection pool is reused across runs).
    pub http: reqwest::Client,
    /// Where to send.
    pub endpoint: Arc<Endpoint>,
    /// The prepared requests; request `i` uses `requests[i % len]`.
    pub requests: Arc<Vec<Prepared>>,
    /// Traffic.
    pub plan: TrafficPlan,
    /// Send offsets from [`TrafficPlan::offsets`].
    pub offsets: Option<Vec<f64>>,
    /// The harness's clock.
    pub clock: Clock,
    /// Progress counters and the stop flag.
    pub shared: Arc<Shared>,
    /// Where finished requests go.
    pub done: Sender<Finished>,
    /// Multi-turn conversations to send instead of `requests` (each turn's body is made
    /// when it is due, the replies so far in it).
    pub sessions: Option<Arc<SessionsPlan>>,
}

/// One turn of a conversation, ready but for the history it is sent with.
#[derive(Clone, Debug)]
pub struct PreparedTurn {
    /// The user's message.
    pub message: String,
    /// Its decoding fields.
    pub params: BodyParams,
    /// Asks for exactly `params.max_tokens` (end of sequence ignored).
    pub exact_output: bool,
}

/// One conversation, ready to send.
#[derive(Clone, Debug)]
pub struct PreparedSession {
    /// Its index.
    pub session_id: u32,
    /// When it starts, s from the run's start.
    pub start_s: f64,
    /// Its turns.
    pub turns: Vec<PreparedTurn>,
}

/// Every conversation of a run, and the pause between a reply and the next message.
#[derive(Clone, Debug)]
pub struct SessionsPlan {
    /// The conversations.
    pub sessions: Vec<PreparedSession>,
    /// Think time, s.
    pub think_time_s: f64,
}

/// Sends the requests on the plan's schedule; each finished request goes to `done`. An
/// error when a request's task died (a panic): its record is lost, so the run is not whole.
pub async fn drive(d: Dispatch) -> Result<(), String> {
    if let Some(sessions) = d.sessions.clone() {
        return drive_sessions(d, sessions).await;
    }
    let Dispatch {
        http,
        endpoint,
        requests,
        plan,
        offsets,
        clock,
        shared,
        done,
        sessions: _,
    } = d;
    if requests.is_empty() {
        return Ok(());
    }
    // The retry of a request whose pooled connection the server had closed goes out on a
    // connection of its own: the pool may hold more connections the server closed at the
    // same moment (it closes idle ones together), and a retry on one of them fails too.
    let fresh = retry_client()?;
    let mut died: Option<String> = None;
    let sem = plan
        .max_concurrency
        .map(|c| Arc::new(tokio::sync::Semaphore::new(c.get() as usize)));
    let start = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut i = 0usize;
    loop {
        let offset = match &offsets {
            Some(o) => match o.get(i) {
                Some(&x) => x,
                None => break,
            },
            None => {
                // Closed loop over a duration: keep sending while it lasts.
                let elapsed = start.elapsed().as_secs_f64();
                if plan.duration_s.is_some_and(|d| elapsed > d) {
                    break;
                }
                elapsed
            }
        };
        let target = start + Duration::from_secs_f64(offset);
        tokio::time::sleep_until(target).await;
        let permit = match &sem {
            Some(s) => match s.clone().acquire_owned().await {
                Ok(p) => Some(p),
                Err(_) => break,
            },
            None => None,
        };
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        if offsets.is_none()
            && plan
                .duration_s
                .is_some_and(|d| start.elapsed().as_secs_f64() > d)
        {
            break;
        }
        let Some(req) = requests.get(i % requests.len()).cloned() else {
            break;
        };
        let scheduled_s = clock.at(target);
        let (http, fresh, endpoint, shared, done) = (
            http.clone(),
            fresh.clone(),
            endpoint.clone(),
            shared.clone(),
            done.clone(),
        );
        let id = u32::try_from(i).unwrap_or(u32::MAX);
        tasks.spawn(async move {
            let clients = Clients {
                pooled: &http,
                fresh: &fresh,
            };
            let f = one(clients, &endpoint, id, &req, scheduled_s, clock, &shared).await;
            let _ = done.send(f);
            drop(permit);
        });
        i += 1;
        // Reap finished tasks so a long run does not keep their handles.
        while let Some(joined) = tasks.try_join_next() {
            note_death(joined, &mut died);
        }
    }
    while let Some(joined) = tasks.join_next().await {
        note_death(joined, &mut died);
    }
    died.map_or(Ok(()), Err)
}

/// The client a retry goes out on: a connection of its own, never a pooled one.
fn retry_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| format!("cannot build the HTTP client for retries: {e}"))
}

/// Sends every conversation: each starts at its time and sends its turns one after the
/// other, each `think_time_s` after the reply before it ended, the conversation so far (the
/// server's own replies) in its prompt. A failed turn ends its conversation (there is no
/// reply to continue from). Request ids count turns as they are sent.
async fn drive_sessions(d: Dispatch, plan: Arc<SessionsPlan>) -> Result<(), String> {
    let fresh = retry_client()?;
    let next_id = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let start = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for session in 0..plan.sessions.len() {
        let (http, fresh, endpoint, shared, done, plan, next_id) = (
            d.http.clone(),
            fresh.clone(),
            d.endpoint.clone(),
            d.shared.clone(),
            d.done.clone(),
            plan.clone(),
            next_id.clone(),
        );
        let clock = d.clock;
        tasks.spawn(async move {
            let Some(s) = plan.sessions.get(session) else {
                return;
            };
            // When the next turn is due: the conversation's start, then each reply's end plus
            // the think time. Its lateness is the time a turn went out after that.
            let mut due = start + Duration::from_secs_f64(s.start_s.max(0.0));
            let clients = Clients {
                pooled: &http,
                fresh: &fresh,
            };
            let think = Duration::from_secs_f64(plan.think_time_s.max(0.0));
            let mut history: Vec<(&'static str, String)> = Vec::new();
            for (turn, t) in s.turns.iter().enumerate() {
                tokio::time::sleep_until(due).await;
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                history.push(("user", t.message.clone()));
                let req = Prepared {
                    api: Api::Chat,
                    body: Arc::new(body(
                        &endpoint,
                        Api::Chat,
                        PromptBody::Messages(&history),
                        &t.params,
                    )),
                    max_tokens: t.params.max_tokens,
                    prompt_tokens: None,
                    exact_output: t.exact_output,
                    keep_reply: true,
                };
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let scheduled_s = clock.at(due);
                let mut f = one(clients, &endpoint, id, &req, scheduled_s, clock, &shared).await;
                f.record.session = Some(llem_results::SessionTurn {
                    session_id: s.session_id,
                    turn: u32::try_from(turn).unwrap_or(u32::MAX),
                });
                let ok = f.record.success;
                let reply = f.reply.take().unwrap_or_default();
                let _ = done.send(f);
                if !ok {
                    return;
                }
                history.push(("assistant", reply));
                due = tokio::time::Instant::now() + think;
            }
        });
    }
    let mut died: Option<String> = None;
    while let Some(joined) = tasks.join_next().await {
        note_death(joined, &mut died);
    }
    died.map_or(Ok(()), Err)
}

/// Keeps the first reason a request task died.
fn note_death(joined: Result<(), tokio::task::JoinError>, died: &mut Option<String>) {
    if let Err(e) = joined
        && died.is_none()
    {
        *died = Some(format!("a request task died: {}", join_reason(e)));
    }
}

/// What a task that did not finish says about why.
pub fn join_reason(e: tokio::task::JoinError) -> String {
    if e.is_cancelled() {
        return "cancelled".into();
    }
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| format!("panicked: {s}"))
        .or_else(|| {
            payload
                .downcast_ref::<String>()
                .map(|s| format!("panicked: {s}"))
        })
        .unwrap_or_else(|| "panicked".into())
}

/// The run's pooled client, and one that opens a new connection for every request.
#[derive(Clone, Copy)]
struct Clients<'a> {
    pooled: &'a reqwest::Client,
    fresh: &'a reqwest::Client,
}

/// Sends one request and reads its stream to the end.
async fn one(
    http: Clients<'_>,
    endpoint: &Endpoint,
    id: u32,
    req: &Prepared,
    scheduled_s: f64,
    clock: Clock,
    shared: &Shared,
) -> Finished {
    let submit_s = clock.now();
    let mut st = StreamState {
        reply: req.keep_reply.then(String::new),
        // A capacity hint only: an open limit or a huge one does not reserve memory up front.
        chunks: Vec::with_capacity(req.max_tokens.map_or(256, |n| n.min(4096) as usize) + 4),
        usage: (None, None),
        cached: None,
        finish: None,
        saw_done: false,
    };
    // Error bodies may echo the request's headers: the key llem sent, or any credential,
    // must not reach requests.parquet or a log.
    let known: Vec<&str> = endpoint.api_key.as_deref().into_iter().collect();
    let error = stream(http, endpoint, req, clock, shared, &mut st)
        .await
        .err()
        .map(|e| llem_config::redact::text(&e.to_string(), &known).into_owned());
    let StreamState {
        chunks,
        usage: final_usage,
        cached,
        finish,
        saw_done,
        reply,
    } = st;
    let end_s = clock.now();
    let acc = accounting::account(&chunks, final_usage.1);
    let output_tokens = u32::try_from(acc.token_times_s.len()).unwrap_or(u32::MAX);
    let input_from_usage = final_usage.0.is_some();
    // Kept as received (they were generated and timed), and said: a server that ignores the
    // cap changes what a token costs.
    let over_cap = req.max_tokens.filter(|cap| output_tokens > *cap);
    Finished {
        record: RequestRecord {
            session: None,
            energy: None,
            request_id: id,
            batch_index: None,
            input_tokens: final_usage.0.unwrap_or(0),
            output_tokens,
            reference_output_tokens: None,
            cached_input_tokens: cached,
            scheduled_s: Some(scheduled_s),
            submit_s,
            first_token_s: acc.token_times_s.first().copied(),
            end_s,
            success: error.is_none(),
            finish_reason: if error.is_some() {
                FinishReason::Error
            } else {
                finish.unwrap_or(FinishReason::Stop)
            },
            error,
            token_times_s: acc.token_times_s,
        },
        mode: acc.mode,
        from_usage: acc.from_usage,
        input_from_usage,
        saw_done,
        over_cap,
        exact_output: req.max_tokens.filter(|_| req.exact_output),
        sent_prompt_tokens: req.prompt_tokens,
        reply,
    }
}

/// What a stream delivered so far.
struct StreamState {
    chunks: Vec<ChunkObs>,
    usage: (Option<u32>, Option<u32>),
    /// Prompt tokens the server took from its prefix cache, when its usage says.
    cached: Option<u32>,
    finish: Option<FinishReason>,
    /// `data: [DONE]` arrived.
    saw_done: bool,
    /// The reply's text so far, when kept.
    reply: Option<String>,
}

impl StreamState {
    /// Takes one event's payload, which arrived at `t` s; `Err` ends the stream as failed.
    fn take(&mut self, t: f64, data: &[u8], shared: &Shared) -> Result<(), StreamError> {
        let c = match chunk::parse(data) {
            Ok(None) => {
                self.saw_done = true;
                return Ok(());
            }
            Ok(Some(c)) if c.is_error => {
                return Err(StreamError::InStream(
                    String::from_utf8_lossy(data.get(..data.len().min(300)).unwrap_or_default())
                        .into_owned(),
                ));
            }
            Ok(Some(c)) => c,
            Err(e) => return Err(e.into()),
        };
        if c.completion_tokens.is_some() {
            self.usage = (c.prompt_tokens.or(self.usage.0), c.completion_tokens);
        }
        if c.cached_prompt_tokens.is_some() {
            self.cached = c.cached_prompt_tokens;
        }
        if c.finish.is_some() {
            self.finish = c.finish;
        }
        if let Some(r) = self.reply.as_mut()
            && c.text_bytes > 0
            && let Some(t) = chunk::reply_text(data)
        {
            r.push_str(&t);
        }
        let prev = self.chunks.last().and_then(|p| p.cum_tokens).unwrap_or(0);
        // Usage on every chunk (continuous stats) lets a chunk carry tokens without
        // text; a final usage on an otherwise empty chunk (llama-server) does not.
        let continuous = self.chunks.last().is_none_or(|p| p.cum_tokens.is_some());
        let tokens_without_text = continuous && c.completion_tokens.is_some_and(|n| n > prev);
        if c.has_choice && (c.text_bytes > 0 || tokens_without_text) {
            let n = match c.completion_tokens {
                Some(cum) => cum.saturating_sub(prev),
                None => u32::from(c.text_bytes > 0),
            };
            shared.tokens.fetch_add(u64::from(n), Ordering::Relaxed);
            self.chunks.push(ChunkObs {
                t_s: t,
                text_bytes: c.text_bytes,
                cum_tokens: c.completion_tokens,
            });
        }
        Ok(())
    }
}

/// Sends the request and returns a response that is an event stream. A pooled keep-alive
/// connection the server closed while idle fails before the request reached it: that is
/// sent once more, on a new connection.
async fn send(
    http: Clients<'_>,
    endpoint: &Endpoint,
    req: &Prepared,
) -> Result<reqwest::Response, StreamError> {
    let url = format!("{}{}", endpoint.base_url, req.api.path());
    let stall = endpoint.stall_timeout;
    let mut attempt = 0;
    let resp = loop {
        let client = if attempt == 0 {
            http.pooled
        } else {
            http.fresh
        };
        let mut rb = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(req.body.as_ref().clone());
        if let Some(k) = &endpoint.api_key {
            rb = rb.bearer_auth(k);
        }
        match tokio::time::timeout(stall, rb.send()).await {
            Err(_) => return Err(StreamError::NoResponse(stall.as_secs_f64())),
            Ok(Err(e)) if attempt == 0 && stale_connection(&e) => attempt += 1,
            Ok(Err(e)) => return Err(StreamError::Request(error_chain(&e))),
            Ok(Ok(r)) => break r,
        }
    };
    let status = resp.status();
    if !status.is_success() {
        let body = body_start(resp, stall).await;
        return Err(StreamError::Status {
            status: status.to_string(),
            body,
        });
    }
    if let Some(kind) = not_an_event_stream(&resp) {
        // A proxy's login page or an API that ignored `stream: true` answers 200 with
        // something else; counting it as a request with no tokens would be a success.
        let body = body_start(resp, stall).await;
        return Err(StreamError::NotAStream {
            status: status.to_string(),
            content_type: kind,
            body,
        });
    }
    Ok(resp)
}

async fn stream(
    http: Clients<'_>,
    endpoint: &Endpoint,
    req: &Prepared,
    clock: Clock,
    shared: &Shared,
    st: &mut StreamState,
) -> Result<(), StreamError> {
    let stall = endpoint.stall_timeout;
    let mut resp = send(http, endpoint, req).await?;
    let mut framer = SseFramer::new();
    let mut failure: Option<StreamError> = None;
    let mut events = 0usize;
    let mut on_event = |t: f64, data: &[u8]| -> bool {
        events += 1;
        match st.take(t, data, shared) {
            Ok(()) => true,
            Err(e) => {
                failure = Some(e);
                false
            }
        }
    };
    loop {
        match tokio::time::timeout(stall, resp.chunk()).await {
            Err(_) => return Err(StreamError::Stalled(stall.as_secs_f64())),
            Ok(Err(e)) => return Err(StreamError::Broken(error_chain(&e))),
            Ok(Ok(None)) => break,
            Ok(Ok(Some(bytes))) => {
                let t = clock.now();
                if !framer.feed(&bytes, &mut |d| on_event(t, d)) {
                    break;
                }
            }
        }
    }
    let t = clock.now();
    framer.finish(&mut |d| on_event(t, d));
    if framer.overflowed() {
        return Err(StreamError::EventTooLong(super::sse::MAX_EVENT_BYTES >> 20));
    }
    match failure {
        Some(f) => Err(f),
        None if events == 0 => Err(StreamError::NoEvent),
        None => Ok(()),
    }
}

/// The first 300 characters of a response body that is not a stream (an error, a page),
/// for the request's error; empty when it does not arrive within `stall`.
async fn body_start(mut resp: reqwest::Response, stall: Duration) -> String {
    // Read a bounded prefix: an error page may be any size, and only its start is quoted.
    let mut buf: Vec<u8> = Vec::new();
    while buf.len() < BODY_QUOTE_READ_BYTES {
        match tokio::time::timeout(stall, resp.chunk()).await {
            Ok(Ok(Some(bytes))) => buf.extend_from_slice(&bytes),
            _ => break,
        }
    }
    buf.truncate(BODY_QUOTE_READ_BYTES);
    let text = String::from_utf8_lossy(&buf);
    // Redacted before the cut, so a credential cut in half is still recognised.
    llem_config::redact::text(&text, &[])
        .chars()
        .take(300)
        .collect::<String>()
        .trim()
        .to_string()
}

/// How much of an error body is read to quote its start.
const BODY_QUOTE_READ_BYTES: usize = 64 * 1024;

/// The content type of a response that declares one other than `text/event-stream`.
fn not_an_event_stream(resp: &reqwest::Response) -> Option<String> {
    let ct = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)?
        .to_str()
        .unwrap_or("(not text)");
    let media = ct.split(';').next().unwrap_or_default().trim();
    (!media.eq_ignore_ascii_case("text/event-stream")).then(|| ct.to_string())
}

/// True when `e` is a connection that was closed before the request was sent.
fn stale_connection(e: &reqwest::Error) -> bool {
    e.is_connect()
        || (e.is_request() && error_chain(e).contains("connection closed before message completed"))
}

/// An error with its sources (reqwest's top-level message alone says little).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn a_request_task_that_panics_is_reported_not_swallowed() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let died = rt.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            tasks.spawn(async {});
            tasks.spawn(async { panic!("cannot convert float seconds to Duration") });
            tasks.spawn(async {});
            let mut died = None;
            while let Some(joined) = tasks.join_next().await {
                note_death(joined, &mut died);
            }
            died
        });
        assert_eq!(
            died.as_deref(),
            Some("a request task died: panicked: cannot convert float seconds to Duration")
        );
        let whole = rt.block_on(async {
            let h = tokio::spawn(async { panic!("{}", String::from("dispatcher bug")) });
            h.await.map_err(join_reason)
        });
        assert_eq!(whole, Err("panicked: dispatcher bug".to_string()));
    }
}
