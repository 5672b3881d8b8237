//! Pushing to a Prometheus Pushgateway (`--metrics-push`): where nothing can scrape the
//! process that measures — a Slurm task on a compute node, a cell whose study runs elsewhere —
//! it PUTs its exposition under job `llem` and its grouping labels every interval and once at
//! the end. The group stays on the gateway after the process ends, so a finished cell's
//! totals remain summable with the others'.

use std::sync::Arc;
use std::time::Duration;

use super::LiveMetrics;
use super::push::{Pusher, endpoint, send};
use crate::LiveError;

/// How often a cell pushes.
pub const PUSH_INTERVAL: Duration = Duration::from_secs(1);

/// Base64 with the URL-safe alphabet and no padding (RFC 4648 section 5), as the gateway's
/// `label@base64/value` path segments take it.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            let index = (n >> (18 - 6 * i)) & 63;
            out.push(char::from(
                ALPHABET.get(index as usize).copied().unwrap_or(b'A'),
            ));
        }
    }
    out
}

/// The gateway path of a group: `/metrics/job/llem/<label>@base64/<value>/...`.
pub(crate) fn group_path(base: &str, grouping: &[(&str, String)]) -> String {
    let mut path = format!("{base}/metrics/job/llem");
    for (k, v) in grouping {
        // An empty value needs the base64 form too (`=` is its encoding of nothing).
        let value = if v.is_empty() {
            "=".to_string()
        } else {
            base64url(v.as_bytes())
        };
        path.push_str(&format!("/{k}@base64/{value}"));
    }
    path
}

/// Whether `url` is a gateway address llem can push to (checked before a study starts, so a
/// typo fails at once rather than in every cell).
pub fn check(url: &str) -> Result<(), LiveError> {
    endpoint("--metrics-push", url, 9091, "").map(|_| ())
}

/// PUTs `metrics` to the gateway at `url` under `grouping` every `interval`.
pub fn start(
    url: &str,
    interval: Duration,
    metrics: Arc<LiveMetrics>,
    grouping: &[(&str, String)],
) -> Result<Pusher, LiveError> {
    let e = endpoint("--metrics-push", url, 9091, "")?;
    let path = group_path(&e.path, grouping);
    Pusher::start("Pushgateway push", interval, move || {
        let body = super::prometheus::render(&metrics.current());
        send(
            &e,
            "PUT",
            &path,
            "text/plain; version=0.0.4",
            body.as_bytes(),
        )
        .map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_labels_travel_base64url_encoded() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(
            group_path("/gw", &[("study", "a/b".into()), ("cell", String::new())]),
            "/gw/metrics/job/llem/study@base64/YS9i/cell@base64/="
        );
    }
}
