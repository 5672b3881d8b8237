//! A zero-compute OpenAI-compatible streaming server for tests and benchmarks: it streams
//! `max_tokens` tokens per request on an exact schedule (first token after
//! `first_token_ms`, then one chunk every `gap_ms`, `tokens_per_chunk` tokens per chunk), so
//! what a client measures can be checked against what was sent.
//!
//! Prompts steer failures: `FAIL` answers HTTP 500, `STALL` sends one chunk then hangs,
//! `ERRCHUNK` sends one chunk then an error object, `CRASH` exits the process, `HTML`
//! answers 200 with an HTML page (a proxy's login page), `EMPTY` answers 200 with an event
//! stream that carries no event, `RATELIMIT` answers 429, `BROKEN` sends one chunk then
//! resets the stream, `BADSSE` sends one chunk then a truncated JSON payload, `BADUSAGE`
//! streams normally but with a usage whose counts are not numbers, `HUGE` sends one chunk
//! then an event that never ends, `ECHOAUTH` answers 400 with the request's
//! `Authorization` header echoed in the body, `OVERRUN` streams ten times `max_tokens`,
//! `NODONE` ends its stream without `data: [DONE]`.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde_json::{Value, json};

/// How the server streams.
#[derive(Clone, Debug)]
pub struct FakeConfig {
    /// Delay before the first token, ms.
    pub first_token_ms: u64,
    /// Gap between chunks, ms.
    pub gap_ms: u64,
    /// Tokens per chunk.
    pub tokens_per_chunk: u32,
    /// Send usage in a final chunk when asked for (`stream_options.include_usage`).
    pub usage: bool,
    /// Send cumulative usage on every chunk when asked for (`continuous_usage_stats`).
    pub continuous_usage: bool,
    /// Start chat streams with a role-only chunk (as vLLM and llama-server do).
    pub role_chunk: bool,
    /// Answer 401 unless requests carry `Authorization: Bearer <key>`.
    pub api_key: Option<String>,
    /// Answer 401 unless requests carry `Authorization: Basic <user:password>` (what a
    /// client sends for `http://user:password@host`).
    pub basic_auth: Option<String>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            first_token_ms: 50,
            gap_ms: 20,
            tokens_per_chunk: 1,
            usage: true,
            continuous_usage: false,
            role_chunk: true,
            api_key: None,
            basic_auth: None,
        }
    }
}

struct AppState {
    cfg: FakeConfig,
    running: AtomicI64,
    served: AtomicI64,
    /// How late each chunk was handed to the connection against its schedule, µs: the
    /// server's own share of any lateness a client measures.
    send_lateness_us: std::sync::Mutex<Vec<f64>>,
}

/// The router.
pub fn router(cfg: FakeConfig) -> Router {
    let state = Arc::new(AppState {
        cfg,
        running: AtomicI64::new(0),
        served: AtomicI64::new(0),
        send_lateness_us: std::sync::Mutex::new(Vec::new()),
    });
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route(
            "/v1/models",
            get(|| async { axum::Json(json!({"object": "list", "data": [{"id": "fake-model", "max_model_len": 4096}]})) }),
        )
        .route("/metrics", get(metrics))
        .route("/stats", get(stats))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .with_state(state)
}

/// Serves on `listener` until the runtime stops.
pub async fn serve(cfg: FakeConfig, listener: tokio::net::TcpListener) {
    // Real servers (uvicorn, hyper) write with TCP_NODELAY; without it Nagle holds the first
    // small chunk behind the unacknowledged headers.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let _ = axum::serve(listener, router(cfg)).await;
}

/// Starts the server on `127.0.0.1:0` in a thread of its own; returns its base URL.
pub fn spawn(cfg: FakeConfig) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(l.local_addr().expect("addr")).expect("send");
            serve(cfg, l).await;
        });
    });
    let addr = rx.recv().expect("server address");
    format!("http://{addr}")
}

async fn metrics(State(s): State<Arc<AppState>>) -> String {
    let running = s.running.load(Ordering::Relaxed);
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"fake-model\"}} {running}\n\
         vllm:num_requests_waiting{{model_name=\"fake-model\"}} 0\n\
         vllm:kv_cache_usage_perc{{model_name=\"fake-model\"}} {}\n\
         vllm:request_success_total {}\n\
         vllm:e2e_request_latency_seconds_bucket{{le=\"1.0\"}} 0\n",
        running as f64 / 100.0,
        s.served.load(Ordering::Relaxed)
    )
}

fn authorised(s: &AppState, headers: &HeaderMap) -> bool {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    s.cfg
        .api_key
        .as_ref()
        .is_none_or(|k| auth == Some(format!("Bearer {k}").as_str()))
        && s.cfg
            .basic_auth
            .as_ref()
            .is_none_or(|u| auth == Some(format!("Basic {}", base64(u.as_bytes())).as_str()))
}

/// Standard base64 with padding (RFC 4648), for the Basic scheme.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// p50 and p99 of the server's send lateness since the last call, then forgets them.
async fn stats(State(s): State<Arc<AppState>>) -> axum::Json<Value> {
    let mut v = std::mem::take(&mut *s.send_lateness_us.lock().unwrap_or_else(|e| e.into_inner()));
    v.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        v.get(((v.len() as f64 - 1.0) * p).round() as usize)
            .copied()
    };
    axum::Json(
        json!({"chunks": v.len(), "send_lateness_p50_us": pct(0.5), "send_lateness_p99_us": pct(0.99)}),
    )
}

async fn completions(State(s): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorised(&s, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let prompt = v["prompt"].as_str().unwrap_or("").to_string();
    stream(s, v, prompt, false, &headers)
}

async fn chat(State(s): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorised(&s, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let prompt = v["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    stream(s, v, prompt, true, &headers)
}

fn chunk(chat: bool, text: &str, finish: Option<&str>, usage: Option<Value>) -> String {
    let choice = if chat {
        json!({"index": 0, "delta": {"content": text}, "finish_reason": finish})
    } else {
        json!({"index": 0, "text": text, "finish_reason": finish})
    };
    let mut c = json!({"id": "x", "object": "chunk", "choices": [choice]});
    if let Some(u) = usage {
        c["usage"] = u;
    }
    format!("data: {c}\n\n")
}

/// The answers that refuse a request before any token: rate limiting, an echoing 400.
fn refusal(prompt: &str, headers: &HeaderMap) -> Option<Response> {
    if prompt.contains("RATELIMIT") {
        return Some(
            (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, "1")],
                axum::Json(
                    json!({"error": {"message": "rate limit exceeded", "type": "rate_limit"}}),
                ),
            )
                .into_response(),
        );
    }
    if prompt.contains("ECHOAUTH") {
        let auth = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        return Some(
            (
                StatusCode::BAD_REQUEST,
                axum::Json(
                    json!({"error": "bad request", "request_headers": {"authorization": auth}}),
                ),
            )
                .into_response(),
        );
    }
    None
}

/// The answer a steering word asks for in place of a stream (or the process's exit).
fn induced_answer(prompt: &str, headers: &HeaderMap) -> Option<Response> {
    if prompt.contains("CRASH") {
        std::process::exit(3);
    }
    if let Some(r) = refusal(prompt, headers) {
        return Some(r);
    }
    if prompt.contains("HTML") {
        return Some(
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                "<html><body>Please log in</body></html>",
            )
                .into_response(),
        );
    }
    if prompt.contains("EMPTY") {
        return Some(
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/event-stream")],
                ": keep-alive comment only\n\n",
            )
                .into_response(),
        );
    }
    if prompt.contains("FAIL") {
        return Some(
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({"object": "error", "message": "induced failure"})),
            )
                .into_response(),
        );
    }
    None
}

fn stream(s: Arc<AppState>, v: Value, prompt: String, chat: bool, headers: &HeaderMap) -> Response {
    if let Some(r) = induced_answer(&prompt, headers) {
        return r;
    }
    let n = v["max_tokens"]
        .as_u64()
        .or_else(|| v["max_completion_tokens"].as_u64())
        .unwrap_or(16) as u32;
    let n = if prompt.contains("OVERRUN") {
        n * 10
    } else {
        n
    };
    let include_usage = s.cfg.usage && v["stream_options"]["include_usage"].as_bool() == Some(true);
    let continuous = s.cfg.continuous_usage
        && v["stream_options"]["continuous_usage_stats"].as_bool() == Some(true);
    let prompt_tokens = prompt.split_whitespace().count() as u64;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let cfg = s.cfg.clone();
    tokio::spawn(async move {
        s.running.fetch_add(1, Ordering::Relaxed);
        let start = tokio::time::Instant::now();
        if chat && cfg.role_chunk {
            let role = json!({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]});
            let _ = tx.send(Ok(Bytes::from(format!("data: {role}\n\n")))).await;
        }
        let k = cfg.tokens_per_chunk.max(1);
        let mut sent = 0u32;
        let mut j = 0u64;
        while sent < n {
            let at = start + Duration::from_millis(cfg.first_token_ms + j * cfg.gap_ms);
            tokio::time::sleep_until(at).await;
            let late_us = at.elapsed().as_secs_f64() * 1e6;
            if let Ok(mut l) = s.send_lateness_us.lock() {
                l.push(late_us);
            }
            let m = k.min(n - sent);
            sent += m;
            let text = "tok ".repeat(m as usize);
            let finish = (sent == n).then_some("length");
            let usage = continuous
                .then(|| json!({"prompt_tokens": prompt_tokens, "completion_tokens": sent}));
            if tx
                .send(Ok(Bytes::from(chunk(chat, &text, finish, usage))))
                .await
                .is_err()
            {
                break;
            }
            if j == 0 && prompt.contains("STALL") {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            if j == 0 && prompt.contains("BROKEN") {
                let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "induced");
                let _ = tx.send(Err(reset)).await;
                return;
            }
            if j == 0 && prompt.contains("BADSSE") {
                let _ = tx
                    .send(Ok(Bytes::from_static(
                        b"data: {\"choices\": [{\"text\": \"tok\n\n",
                    )))
                    .await;
            }
            if j == 0 && prompt.contains("HUGE") {
                let piece = Bytes::from(vec![b'x'; 64 * 1024]);
                let _ = tx.send(Ok(Bytes::from_static(b"data: "))).await;
                // Bounded by the test's patience, not the client's: 64 MiB at most.
                for _ in 0..1024 {
                    if tx.send(Ok(piece.clone())).await.is_err() {
                        return;
                    }
                }
                return;
            }
            if j == 0 && prompt.contains("ERRCHUNK") {
                let _ = tx
                    .send(Ok(Bytes::from(
                        "data: {\"error\": {\"message\": \"induced\"}}\n\n",
                    )))
                    .await;
                break;
            }
            j += 1;
        }
        if prompt.contains("BADUSAGE") {
            let u = json!({"id": "x", "choices": [], "usage": {"prompt_tokens": "some", "completion_tokens": "many"}});
            let _ = tx.send(Ok(Bytes::from(format!("data: {u}\n\n")))).await;
        } else if include_usage {
            let u = json!({"id": "x", "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + u64::from(n)}});
            let _ = tx.send(Ok(Bytes::from(format!("data: {u}\n\n")))).await;
        }
        if !prompt.contains("NODONE") {
            let _ = tx.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).await;
        }
        s.running.fetch_sub(1, Ordering::Relaxed);
        s.served.fetch_add(1, Ordering::Relaxed);
    });
    let body =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
