//! The `schedule:` block of a study file (the Python llem's daemon mode) and the duration,
//! time-of-day and weekday words it shares with `llem schedule`'s flags.

use std::time::Duration;

use crate::block::{Block, error_at};
use crate::error::{ConfigError, ErrorKind, ValueError, ValueKind, did_you_mean};
use crate::source::SourceMap;

/// The longest duration a flag or schedule field takes, s: 30 days (a `total_duration` may
/// be longer, see [`MAX_TOTAL_S`]).
pub const MAX_DURATION_S: f64 = 30.0 * 86_400.0;

/// The longest `total_duration`, s: a year.
pub const MAX_TOTAL_S: f64 = 366.0 * 86_400.0;

/// Parses `100ms`, `0.5s`, `2m`, `6h`, `1d`, `250us`, or a bare number of milliseconds, at
/// most `max_s` seconds and at least a microsecond.
pub fn parse_duration(s: &str, max_s: f64) -> Result<Duration, ValueError> {
    let err = |reason: String| ValueError::new(ValueKind::Duration, s, reason);
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else if let Some(n) = t.strip_suffix('d') {
        (n, 86_400.0)
    } else {
        (t, 1e-3)
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        err(format!(
            "`{s}` is not a duration (e.g. 100ms, 0.5s, 2m, 6h, 1d)"
        ))
    })?;
    if !v.is_finite() || v <= 0.0 {
        return Err(err(format!("`{s}` must be a positive duration")));
    }
    let seconds = v * scale;
    if seconds > max_s {
        return Err(err(format!(
            "`{s}` is longer than {}",
            if max_s >= MAX_TOTAL_S {
                "a year"
            } else {
                "30 days"
            }
        )));
    }
    // A positive value that rounds to no time at all would be a zero interval (a busy loop).
    if seconds < 1e-6 {
        return Err(err(format!("`{s}` is shorter than a microsecond")));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A local time of day.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeOfDay {
    /// 0-23.
    pub hour: i8,
    /// 0-59.
    pub minute: i8,
    /// 0-59.
    pub second: i8,
}

/// Parses `HH:MM` or `HH:MM:SS` (24-hour clock).
pub fn parse_time_of_day(s: &str) -> Result<TimeOfDay, ValueError> {
    let err = |reason: String| ValueError::new(ValueKind::TimeOfDay, s, reason);
    let parts: Vec<&str> = s.trim().split(':').collect();
    let num = |p: Option<&&str>, max: i8, what: &str| -> Result<i8, ValueError> {
        let p =
            p.ok_or_else(|| err(format!("`{s}`: expected HH:MM (24-hour clock), e.g. 02:00")))?;
        let v: i8 = p.parse().map_err(|_| {
            err(format!(
                "`{s}`: {what} `{p}` is not a number (expected HH:MM)"
            ))
        })?;
        if !(0..=max).contains(&v) {
            return Err(err(format!("`{s}`: {what} must be 0-{max}")));
        }
        Ok(v)
    };
    if !(2..=3).contains(&parts.len()) {
        return Err(err(format!(
            "`{s}`: expected HH:MM (24-hour clock), e.g. 02:00"
        )));
    }
    Ok(TimeOfDay {
        hour: num(parts.first(), 23, "hour")?,
        minute: num(parts.get(1), 59, "minute")?,
        second: if parts.len() == 3 {
            num(parts.get(2), 59, "second")?
        } else {
            0
        },
    })
}

/// Days of the week, Monday first (ISO 8601 numbering minus one).
pub const WEEKDAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// Parses day words (`mon` ... `sun`, full names, `weekdays`, `weekends`, `daily`) into a set
/// of weekdays, Monday = 0.
pub fn parse_days(words: &[&str]) -> Result<Vec<u8>, ValueError> {
    let mut days = Vec::new();
    for w in words {
        let lower = w.trim().to_ascii_lowercase();
        let add: Vec<u8> = match lower.as_str() {
            "weekdays" => (0..5).collect(),
            "weekends" | "weekend" => vec![5, 6],
            "daily" | "all" | "everyday" => (0..7).collect(),
            _ => {
                let full = [
                    "monday",
                    "tuesday",
                    "wednesday",
                    "thursday",
                    "friday",
                    "saturday",
                    "sunday",
                ];
                let found = WEEKDAYS
                    .iter()
                    .zip(full)
                    .position(|(short, long)| lower == *short || lower == long);
                match found {
                    Some(i) => vec![i as u8],
                    None => {
                        let hint = did_you_mean(
                            &lower,
                            WEEKDAYS
                                .iter()
                                .copied()
                                .chain(full)
                                .chain(["weekdays", "weekends"]),
                        )
                        .map(|c| format!(" (did you mean `{c}`?)"))
                        .unwrap_or_default();
                        return Err(ValueError::new(
                            ValueKind::Day,
                            w,
                            format!(
                                "`{w}` is not a day: use mon, tue, wed, thu, fri, sat, sun, weekdays or weekends{hint}"
                            ),
                        ));
                    }
                }
            }
        };
        for d in add {
            if !days.contains(&d) {
                days.push(d);
            }
        }
    }
    days.sort_unstable();
    Ok(days)
}

/// When a scheduled study runs, from the `schedule:` block or `llem schedule`'s flags.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScheduleSpec {
    /// Between the starts of consecutive runs (`interval`, `--every`).
    pub interval: Option<Duration>,
    /// Local times of day to start (`at`, `--at`); with an interval, the first start.
    pub at: Vec<TimeOfDay>,
    /// Days runs may start on, Monday = 0; empty = every day.
    pub days: Vec<u8>,
    /// No run starts once this long has passed since the schedule began.
    pub total_duration: Option<Duration>,
}

fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    let (v, unit) = if s >= 86_400.0 && s % 86_400.0 == 0.0 {
        (s / 86_400.0, "d")
    } else if s >= 3600.0 && s % 3600.0 == 0.0 {
        (s / 3600.0, "h")
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        (s / 60.0, "m")
    } else {
        (s, "s")
    };
    format!("{}{unit}", crate::schema::fmt_num(v))
}

impl std::fmt::Display for TimeOfDay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02}:{:02}", self.hour, self.minute)?;
        if self.second != 0 {
            write!(f, ":{:02}", self.second)?;
        }
        Ok(())
    }
}

impl ScheduleSpec {
    /// One line for the plan: "every 6h from 09:00, on mon, wed, fri, for 7d".
    pub fn describe(&self) -> String {
        let at: Vec<String> = self.at.iter().map(ToString::to_string).collect();
        let mut out = match (self.interval, at.is_empty()) {
            (Some(i), true) => format!("every {}", human(i)),
            (Some(i), false) => format!("every {} from {}", human(i), at.join(", ")),
            (None, _) => format!("daily at {}", at.join(", ")),
        };
        if !self.days.is_empty() {
            let days: Vec<&str> = self
                .days
                .iter()
                .filter_map(|d| WEEKDAYS.get(usize::from(*d)).copied())
                .collect();
            out.push_str(&format!(", on {}", days.join(", ")));
        }
        match self.total_duration {
            Some(t) => out.push_str(&format!(", for {}", human(t))),
            None => out.push_str(", until stopped"),
        }
        out
    }
}

impl serde::Serialize for ScheduleSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("interval_s", &self.interval.map(|d| d.as_secs_f64()))?;
        let at: Vec<String> = self.at.iter().map(ToString::to_string).collect();
        m.serialize_entry("at", &at)?;
        let days: Vec<&str> = self
            .days
            .iter()
            .filter_map(|d| WEEKDAYS.get(usize::from(*d)).copied())
            .collect();
        m.serialize_entry("days", &days)?;
        m.serialize_entry(
            "total_duration_s",
            &self.total_duration.map(|d| d.as_secs_f64()),
        )?;
        m.end()
    }
}

/// The Python llem's default `total_duration` for a `schedule:` block, s (24 h).
pub const DEFAULT_TOTAL_DURATION_S: u64 = 24 * 3600;

const KEYS: [&str; 5] = ["enabled", "interval", "at", "days", "total_duration"];

/// The `schedule:` block of `root`: `None` when absent or `enabled` is not true.
pub fn from_root(
    root: &crate::yaml::Map,
    sources: &SourceMap,
) -> Result<Option<ScheduleSpec>, ConfigError> {
    let Some((block, node)) = Block::of(root, "schedule", &KEYS, sources)? else {
        return Ok(None);
    };
    let enabled = block.enabled()?;
    let interval = block.duration("interval", MAX_DURATION_S)?;
    let total = block.duration("total_duration", MAX_TOTAL_S)?;
    let mut at = Vec::new();
    for (n, s) in block.list("at")? {
        at.push(
            parse_time_of_day(s)
                .map_err(|m| error_at(sources, n, ErrorKind::Type, format!("schedule.at: {m}")))?,
        );
    }
    let days = block.days()?;
    if !enabled {
        return Ok(None);
    }
    if interval.is_none() && at.is_empty() {
        return Err(error_at(
            sources,
            node,
            ErrorKind::Missing,
            "`schedule` is enabled but says neither `interval` nor `at`".into(),
        ));
    }
    Ok(Some(ScheduleSpec {
        interval,
        at,
        days,
        total_duration: Some(total.unwrap_or(Duration::from_secs(DEFAULT_TOTAL_DURATION_S))),
    }))
}

impl Block<'_> {
    /// `enabled`: false unless it says true.
    fn enabled(&self) -> Result<bool, ConfigError> {
        match self.text("enabled")? {
            None => Ok(false),
            Some((n, s)) => match s {
                "true" | "True" | "yes" => Ok(true),
                "false" | "False" | "no" => Ok(false),
                _ => Err(self.err(
                    n,
                    ErrorKind::Type,
                    format!("`schedule.enabled` must be true or false, found `{s}`"),
                )),
            },
        }
    }

    /// A duration of at most `max` seconds.
    fn duration(&self, key: &str, max: f64) -> Result<Option<Duration>, ConfigError> {
        self.text(key)?
            .map(|(n, s)| {
                parse_duration(s, max)
                    .map_err(|m| self.err(n, ErrorKind::Range, format!("schedule.{key}: {m}")))
            })
            .transpose()
    }

    /// `days`, each once, in week order.
    fn days(&self) -> Result<Vec<u8>, ConfigError> {
        let mut days = Vec::new();
        for (n, s) in self.list("days")? {
            // Comma lists as the Python flags take them: `mon,wed,fri`.
            let words: Vec<&str> = s.split(',').collect();
            for d in parse_days(&words)
                .map_err(|m| self.err(n, ErrorKind::Type, format!("schedule.days: {m}")))?
            {
                if !days.contains(&d) {
                    days.push(d);
                }
            }
        }
        days.sort_unstable();
        Ok(days)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::source::SourceKind;

    fn block(yaml: &str) -> Result<Option<ScheduleSpec>, ConfigError> {
        let mut sources = SourceMap::new();
        let id = sources.add_synthetic("s.yaml", SourceKind::CommandLine);
        let root = crate::yaml::parse(yaml, id).unwrap();
        from_root(root.as_map().unwrap(), &sources)
    }

    #[test]
    fn the_python_block_reads_as_written() {
        let s = block(
            "schedule:\n  enabled: true\n  interval: 6h\n  at: \"09:00\"\n  days: [mon, wed, fri]\n  total_duration: 7d\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.interval, Some(Duration::from_secs(6 * 3600)));
        assert_eq!(
            s.at,
            [TimeOfDay {
                hour: 9,
                minute: 0,
                second: 0
            }]
        );
        assert_eq!(s.days, [0, 2, 4]);
        assert_eq!(s.total_duration, Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(
            s.describe(),
            "every 6h from 09:00, on mon, wed, fri, for 7d"
        );
        // The Python defaults: off unless enabled; 24 h in all when enabled.
        assert_eq!(block("schedule: {interval: 6h}\n").unwrap(), None);
        let s = block("schedule: {enabled: true, at: [\"02:00\", \"14:30\"], days: weekdays}\n")
            .unwrap()
            .unwrap();
        assert_eq!(s.at.len(), 2);
        assert_eq!(s.days, [0, 1, 2, 3, 4]);
        assert_eq!(s.total_duration, Some(Duration::from_secs(86_400)));
    }

    #[test]
    fn mistakes_are_located_and_named() {
        let cases = [
            (
                "schedule: {enabled: true, intervall: 6h}\n",
                "unknown key `schedule.intervall`",
            ),
            ("schedule: {enabled: true}\n", "neither `interval` nor `at`"),
            (
                "schedule: {enabled: true, interval: soon}\n",
                "not a duration",
            ),
            (
                "schedule: {enabled: true, at: \"25:00\"}\n",
                "hour must be 0-23",
            ),
            (
                "schedule: {enabled: true, at: \"09:00\", days: [mon, fryday]}\n",
                "`fryday` is not a day",
            ),
            (
                "schedule: {enabled: maybe, at: \"09:00\"}\n",
                "true or false",
            ),
            ("schedule: [6h]\n", "must be a mapping"),
        ];
        for (yaml, want) in cases {
            let e = block(yaml).unwrap_err().to_string();
            assert!(e.contains(want), "{yaml}: {e}");
            assert!(e.contains("s.yaml:1:"), "{yaml}: {e}");
        }
        let e = block("schedule: {enabled: true, intervall: 6h}\n").unwrap_err();
        assert_eq!(
            e.diagnostics[0].help.as_deref(),
            Some("did you mean `interval`?")
        );
        assert!(
            parse_days(&["fri", "friday", "weekends"]).unwrap() == [4, 5, 6]
                && parse_days(&["fryday"])
                    .unwrap_err()
                    .reason
                    .contains("did you mean `friday`?")
        );
    }
}
