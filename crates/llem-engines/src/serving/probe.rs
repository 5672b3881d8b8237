//! Whether an OpenAI-compatible server at a URL answers, for the doctor and for the wait
//! before a run: a refused connection is told apart from a server that is still starting.

use std::time::Duration;

/// What a server's base URL answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointProbe {
    /// `GET <path>` answered 200.
    Ready {
        /// The route that answered (`/health` or `/v1/models`).
        path: &'static str,
    },
    /// The server answered, but not yet as ready (a 503 while it loads, a 401 without a key).
    Answering {
        /// Its last status line and the start of its body.
        last: String,
    },
    /// Nothing answers there: the connection was refused, or the host cannot be reached.
    Unreachable {
        /// Why, as the HTTP client says.
        reason: String,
    },
}

/// True when a request failed before any server took the connection (refused, no route,
/// unknown host): nothing is starting there.
pub fn unreachable(e: &reqwest::Error) -> bool {
    e.is_connect()
}

/// Asks `base_url` for `/health`, then `/v1/models`, each within `timeout`.
pub fn probe(base_url: &str, timeout: Duration) -> EndpointProbe {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return EndpointProbe::Unreachable {
                reason: format!("cannot start the HTTP runtime: {e}"),
            };
        }
    };
    let http = match reqwest::Client::builder().timeout(timeout).build() {
        Ok(c) => c,
        Err(e) => {
            return EndpointProbe::Unreachable {
                reason: format!("cannot build the HTTP client: {e}"),
            };
        }
    };
    let base = base_url.trim_end_matches('/');
    rt.block_on(async {
        let mut last = String::new();
        for path in ["/health", "/v1/models"] {
            match http.get(format!("{base}{path}")).send().await {
                Ok(r) if r.status().as_u16() == 200 => return EndpointProbe::Ready { path },
                Ok(r) => {
                    let status = r.status();
                    let body = r.text().await.unwrap_or_default();
                    let body: String = body.trim().chars().take(120).collect();
                    last = format!("GET {path}: HTTP {status} {body}")
                        .trim()
                        .to_string();
                }
                Err(e) if unreachable(&e) => {
                    return EndpointProbe::Unreachable {
                        reason: llem_config::redact::text(&super::client::error_chain(&e), &[])
                            .into_owned(),
                    };
                }
                Err(e) => last = format!("GET {path}: {}", super::client::error_chain(&e)),
            }
        }
        EndpointProbe::Answering { last }
    })
}
