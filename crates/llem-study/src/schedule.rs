//! `llem schedule`: when the next run starts, for an interval, times of day (local time), or
//! both (the first run at a time of day, then at the interval), on chosen weekdays, within a
//! total duration.

use jiff::civil::Time;
use jiff::{SignedDuration, Timestamp, Zoned};
use llem_config::schedule::{ScheduleSpec, TimeOfDay};

/// The jiff time of a [`TimeOfDay`].
pub fn civil(t: TimeOfDay) -> Time {
    Time::new(t.hour, t.minute, t.second, 0).unwrap_or(Time::midnight())
}

/// True when runs may start on the day of `z`.
fn allowed(spec: &ScheduleSpec, z: &Zoned) -> bool {
    spec.days.is_empty()
        || spec
            .days
            .contains(&(z.weekday().to_monday_zero_offset() as u8))
}

/// The first start strictly after `now` at one of `times` (midnight when there are none), on
/// an allowed day, in `now`'s time zone (a time that a DST change skips moves to the next
/// valid instant, as jiff's compatible disambiguation does).
fn next_at(spec: &ScheduleSpec, now: &Zoned, times: &[Time]) -> Option<Zoned> {
    let midnight = [Time::midnight()];
    let times = if times.is_empty() {
        &midnight[..]
    } else {
        times
    };
    // Eight days: every weekday is reached, whatever the day filter.
    for day in 0..=8 {
        let date = now.date().checked_add(jiff::Span::new().days(day)).ok()?;
        let mut best: Option<Zoned> = None;
        for t in times {
            let Ok(z) = date.to_datetime(*t).to_zoned(now.time_zone().clone()) else {
                continue;
            };
            if z.timestamp() > now.timestamp()
                && allowed(spec, &z)
                && best.as_ref().is_none_or(|b| z.timestamp() < b.timestamp())
            {
                best = Some(z);
            }
        }
        if best.is_some() {
            return best;
        }
    }
    None
}

/// What comes after a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// The next run starts then.
    At(Zoned),
    /// The total duration is spent: no more runs.
    Over,
}

/// When the run after one that started at `last_start` begins, seen at `now`, for a schedule
/// that began at `began`.
pub fn next_start(
    spec: &ScheduleSpec,
    last_start: Option<Timestamp>,
    began: Timestamp,
    now: &Zoned,
) -> Option<Next> {
    let times: Vec<Time> = spec.at.iter().copied().map(civil).collect();
    let candidate = match (last_start, spec.interval) {
        (Some(last), Some(every)) => {
            let step = SignedDuration::try_from(every).ok()?;
            // A run longer than the interval: start the next at once, not a burst of catch-ups.
            let next = last.checked_add(step).ok()?.max(now.timestamp());
            let z = next.to_zoned(now.time_zone().clone());
            if allowed(spec, &z) {
                z
            } else {
                let day_before = z.checked_sub(jiff::Span::new().nanoseconds(1)).ok()?;
                next_at(spec, &day_before, &times)?
            }
        }
        (None, _) if !times.is_empty() => next_at(spec, now, &times)?,
        (Some(_), None) => next_at(spec, now, &times)?,
        (None, None) | (None, Some(_)) => {
            if allowed(spec, now) {
                now.clone()
            } else {
                next_at(spec, now, &[])?
            }
        }
    };
    if let Some(total) = spec.total_duration {
        let end = began
            .checked_add(SignedDuration::try_from(total).ok()?)
            .ok()?;
        if candidate.timestamp() >= end {
            return Some(Next::Over);
        }
    }
    Some(Next::At(candidate))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use jiff::tz::TimeZone;
    use llem_config::schedule::parse_time_of_day;
    use std::time::Duration;

    fn at(s: &str) -> Zoned {
        let ts: Timestamp = s.parse().unwrap();
        ts.to_zoned(TimeZone::UTC)
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn times(t: &[&str]) -> Vec<TimeOfDay> {
        t.iter().map(|s| parse_time_of_day(s).unwrap()).collect()
    }

    fn next(spec: &ScheduleSpec, last: Option<&str>, now: &str) -> String {
        match next_start(spec, last.map(ts), ts("2026-11-20T00:00:00Z"), &at(now)).unwrap() {
            Next::At(z) => z.timestamp().to_string(),
            Next::Over => "over".into(),
        }
    }

    #[test]
    fn at_picks_the_next_time_today_or_tomorrow() {
        let s = ScheduleSpec {
            at: times(&["02:00", "14:00"]),
            ..ScheduleSpec::default()
        };
        assert_eq!(
            next(&s, None, "2026-11-21T10:00:00Z"),
            "2026-11-21T14:00:00Z"
        );
        assert_eq!(
            next(&s, Some("2026-11-21T14:00:00Z"), "2026-11-21T14:00:00Z"),
            "2026-11-22T02:00:00Z"
        );
    }

    #[test]
    fn every_counts_from_the_last_start_and_never_bursts() {
        let s = ScheduleSpec {
            interval: Some(Duration::from_secs(6 * 3600)),
            ..ScheduleSpec::default()
        };
        let now = "2026-11-21T10:00:00Z";
        assert_eq!(next(&s, None, now), now);
        assert_eq!(
            next(&s, Some("2026-11-21T08:00:00Z"), now),
            "2026-11-21T14:00:00Z"
        );
        assert_eq!(next(&s, Some("2026-11-20T00:00:00Z"), now), now);
    }

    #[test]
    fn at_and_every_together_start_at_the_time_then_follow_the_interval() {
        let s = ScheduleSpec {
            interval: Some(Duration::from_secs(6 * 3600)),
            at: times(&["02:00"]),
            ..ScheduleSpec::default()
        };
        assert_eq!(
            next(&s, None, "2026-11-21T10:00:00Z"),
            "2026-11-22T02:00:00Z"
        );
        assert_eq!(
            next(&s, Some("2026-11-22T02:00:00Z"), "2026-11-22T03:00:00Z"),
            "2026-11-22T08:00:00Z"
        );
    }

    #[test]
    fn days_skip_to_the_next_allowed_day_and_the_total_ends_it() {
        // 2026-11-21 is a Saturday.
        let weekdays = ScheduleSpec {
            at: times(&["09:00"]),
            days: vec![0, 1, 2, 3, 4],
            ..ScheduleSpec::default()
        };
        assert_eq!(
            next(&weekdays, None, "2026-11-21T10:00:00Z"),
            "2026-11-23T09:00:00Z"
        );
        // An interval that lands on a weekend moves to Monday's first minute.
        let every = ScheduleSpec {
            interval: Some(Duration::from_secs(12 * 3600)),
            days: vec![0, 1, 2, 3, 4],
            ..ScheduleSpec::default()
        };
        assert_eq!(
            next(&every, Some("2026-11-20T18:00:00Z"), "2026-11-20T19:00:00Z"),
            "2026-11-23T00:00:00Z"
        );
        // Started on a Saturday with no time of day: waits for Monday.
        assert_eq!(
            next(&every, None, "2026-11-21T10:00:00Z"),
            "2026-11-23T00:00:00Z"
        );
        // The schedule began 2026-11-20T00:00Z; 2 days in all.
        let total = ScheduleSpec {
            interval: Some(Duration::from_secs(24 * 3600)),
            total_duration: Some(Duration::from_secs(2 * 86_400)),
            ..ScheduleSpec::default()
        };
        assert_eq!(
            next(&total, Some("2026-11-21T00:00:00Z"), "2026-11-21T01:00:00Z"),
            "over"
        );
        assert_eq!(
            next(&total, Some("2026-11-20T00:00:00Z"), "2026-11-20T01:00:00Z"),
            "2026-11-21T00:00:00Z"
        );
    }
}
