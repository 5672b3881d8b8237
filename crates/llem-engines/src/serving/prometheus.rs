//! The Prometheus text exposition format, read by hand: `prometheus-parse` drops metric
//! names with `:` (every `vllm:*` and `sglang:*` series), so it cannot be used.

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample<'a> {
    /// Metric name, `vllm:num_requests_running`.
    pub name: &'a str,
    /// The label set as written, braces included (`{model_name="m"}`), or empty.
    pub labels: &'a str,
    /// Value (`NaN`, `+Inf`, `-Inf` allowed).
    pub value: f64,
}

/// Parses an exposition body; comment, blank and unreadable lines are skipped (a scrape
/// must not fail because of one odd line).
pub fn parse(body: &str) -> impl Iterator<Item = Sample<'_>> {
    body.lines().filter_map(parse_line)
}

fn parse_line(line: &str) -> Option<Sample<'_>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let (name, rest) = line.split_at(name_end);
    if name.is_empty() {
        return None;
    }
    let (labels, rest) = if rest.starts_with('{') {
        let end = labels_end(rest)?;
        (rest.get(..end)?, rest.get(end..)?)
    } else {
        ("", rest)
    };
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// Byte index just past the `}` closing a label set, honouring quoted values with escapes.
fn labels_end(s: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// The gauges llem summarises, by meaning, across engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gauge {
    /// Sequences being decoded.
    Running,
    /// Requests queued.
    Waiting,
    /// KV cache in use, fraction 0-1.
    KvCacheUsage,
}

/// True for series llem does not keep: histogram buckets (hundreds per scrape, and the
/// latencies they summarise are measured per request by llem itself).
pub fn dropped(name: &str) -> bool {
    name.ends_with("_bucket")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::registry::gauge_of;

    #[test]
    fn vllm_names_with_colons_and_odd_labels_parse() {
        let body = r#"# HELP vllm:num_requests_running Number of requests
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 12.0
vllm:kv_cache_usage_perc{model_name="a}\"b"} 0.25 1700000000000
tgi_queue_size 3
llamacpp:requests_processing 2
weird_value{a="b"} +Inf
nan_value NaN
not a sample line
vllm:e2e_request_latency_seconds_bucket{le="0.3"} 5
"#;
        let s: Vec<Sample<'_>> = parse(body).collect();
        assert_eq!(s.len(), 7);
        assert_eq!(s[0].name, "vllm:num_requests_running");
        assert_eq!(s[0].labels, r#"{engine="0",model_name="m"}"#);
        assert_eq!(s[0].value, 12.0);
        assert_eq!(s[1].labels, r#"{model_name="a}\"b"}"#);
        assert_eq!(s[1].value, 0.25);
        assert_eq!(
            (s[2].name, s[2].labels, s[2].value),
            ("tgi_queue_size", "", 3.0)
        );
        assert!(s[4].value.is_infinite());
        assert!(s[5].value.is_nan());
        assert_eq!(gauge_of(s[0].name), Some(Gauge::Running));
        assert_eq!(gauge_of(s[3].name), Some(Gauge::Running));
        assert!(dropped(s[6].name));
    }
}
