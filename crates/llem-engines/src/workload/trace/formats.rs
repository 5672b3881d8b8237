//! The published trace formats, each as the names of its columns (CSV) or keys (JSONL) and
//! the unit of its timestamp:
//!
//! - Azure LLM inference traces 2023 and 2024: CSV `TIMESTAMP,ContextTokens,GeneratedTokens`,
//!   `TIMESTAMP` a wall-clock date and time (`2023-11-16 18:15:46.6805900`, 100 ns digits).
//! - BurstGPT: CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`
//!   (later releases add columns; they are read by name), `Timestamp` in seconds from the
//!   trace's start; a row with 0 response tokens is a request that failed.
//! - Mooncake: JSONL `{"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}`,
//!   each hash id one 512-token block of prompt, equal ids the same block.
//! - Any other CSV or JSONL, with its columns named (`columns:`).

/// How a timestamp is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// A number of seconds.
    Seconds,
    /// A number of milliseconds.
    Milliseconds,
    /// A number of microseconds.
    Microseconds,
    /// `YYYY-MM-DD HH:MM:SS[.fraction]` (or with `T`), read as UTC.
    DateTime,
}

/// Whether the file is CSV with a header row or JSON Lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// CSV, the first record naming the columns.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

/// Where a trace keeps each figure of a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Columns {
    /// CSV or JSONL.
    pub layout: Layout,
    /// The arrival time.
    pub timestamp: String,
    /// Its unit.
    pub unit: TimeUnit,
    /// Prompt tokens.
    pub input_tokens: String,
    /// Tokens generated.
    pub output_tokens: String,
    /// The prompt's blocks, as a list of ids (JSONL) or ids separated by spaces or `;` (CSV).
    pub hash_ids: Option<String>,
    /// The model that served it (a filter may keep one).
    pub model: Option<String>,
}

/// A trace format.
#[derive(Clone, Debug, PartialEq)]
pub enum TraceFormat {
    /// Azure LLM inference trace, 2023 or 2024.
    Azure,
    /// BurstGPT.
    BurstGpt,
    /// Mooncake.
    Mooncake,
    /// Another file, its columns named.
    Mapped(Columns),
}

/// Tokens in one Mooncake prefix block.
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

impl TraceFormat {
    /// The format's columns.
    pub fn columns(&self) -> Columns {
        let s = |x: &str| x.to_string();
        match self {
            TraceFormat::Azure => Columns {
                layout: Layout::Csv,
                timestamp: s("TIMESTAMP"),
                unit: TimeUnit::DateTime,
                input_tokens: s("ContextTokens"),
                output_tokens: s("GeneratedTokens"),
                hash_ids: None,
                model: None,
            },
            TraceFormat::BurstGpt => Columns {
                layout: Layout::Csv,
                timestamp: s("Timestamp"),
                unit: TimeUnit::Seconds,
                input_tokens: s("Request tokens"),
                output_tokens: s("Response tokens"),
                hash_ids: None,
                model: Some(s("Model")),
            },
            TraceFormat::Mooncake => Columns {
                layout: Layout::Jsonl,
                timestamp: s("timestamp"),
                unit: TimeUnit::Milliseconds,
                input_tokens: s("input_length"),
                output_tokens: s("output_length"),
                hash_ids: Some(s("hash_ids")),
                model: None,
            },
            TraceFormat::Mapped(c) => c.clone(),
        }
    }

    /// Its name in a study file.
    pub fn name(&self) -> &'static str {
        match self {
            TraceFormat::Azure => "azure",
            TraceFormat::BurstGpt => "burstgpt",
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Mapped(_) => "columns",
        }
    }
}

/// Nanoseconds since the Unix epoch of `YYYY-MM-DD HH:MM:SS[.fraction]` (UTC; a `T` may stand
/// for the space, a trailing `Z` is allowed); `None` when it is not one.
pub fn datetime_ns(text: &str) -> Option<i64> {
    let t = text.trim().trim_end_matches('Z');
    let (date, time) = t.split_once([' ', 'T'])?;
    let mut d = date.splitn(3, '-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let (hms, frac) = match time.split_once('.') {
        Some((a, b)) => (a, b),
        None => (time, ""),
    };
    let mut p = hms.splitn(3, ':');
    let h: i64 = p.next()?.parse().ok()?;
    let min: i64 = p.next()?.parse().ok()?;
    let sec: i64 = p.next()?.parse().ok()?;
    if h > 23 || min > 59 || sec > 60 {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Nine digits of nanoseconds; more are cut, fewer padded.
    let digits: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
    let nanos: i64 = digits.parse().ok()?;
    // Days from the civil date (years starting in March).
    let yy = if m <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + h * 3600 + min * 60 + sec;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// A timestamp in `unit` as nanoseconds; `None` when it is not one.
pub fn timestamp_ns(text: &str, unit: TimeUnit) -> Option<i64> {
    let per = match unit {
        TimeUnit::DateTime => return datetime_ns(text),
        TimeUnit::Seconds => 1e9,
        TimeUnit::Milliseconds => 1e6,
        TimeUnit::Microseconds => 1e3,
    };
    let v: f64 = text.trim().parse().ok()?;
    let ns = v * per;
    (ns.is_finite() && ns.abs() < 9.0e18).then_some(ns.round() as i64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn azure_datetimes_keep_their_100_ns_digits() {
        let a = datetime_ns("2023-11-16 18:15:46.6805900").unwrap();
        let b = datetime_ns("2023-11-16 18:15:46.6806900").unwrap();
        assert_eq!(b - a, 100_000);
        // 2023-11-16 is 19677 days after 1970-01-01.
        assert_eq!(
            datetime_ns("2023-11-16 00:00:00").unwrap(),
            19_677 * 86_400 * 1_000_000_000
        );
        assert_eq!(
            datetime_ns("2024-05-10T00:00:01Z").unwrap()
                - datetime_ns("2024-05-10 00:00:00").unwrap(),
            1_000_000_000
        );
        for bad in [
            "2023-13-01 00:00:00",
            "yesterday",
            "2023-11-16",
            "2023-11-16 18:15:4x",
        ] {
            assert_eq!(datetime_ns(bad), None, "{bad}");
        }
    }

    #[test]
    fn numeric_timestamps_by_unit() {
        assert_eq!(timestamp_ns("1.5", TimeUnit::Seconds), Some(1_500_000_000));
        assert_eq!(
            timestamp_ns("27482", TimeUnit::Milliseconds),
            Some(27_482_000_000)
        );
        assert_eq!(timestamp_ns("7", TimeUnit::Microseconds), Some(7_000));
        assert_eq!(timestamp_ns("NaN", TimeUnit::Seconds), None);
        assert_eq!(timestamp_ns("1e300", TimeUnit::Seconds), None);
    }
}
