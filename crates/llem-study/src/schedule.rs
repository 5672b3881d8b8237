//! `llem schedule`: when the next run starts, for `--every 6h` or `--at 02:00` (local time).

use jiff::civil::Time;
use jiff::{SignedDuration, Timestamp, Zoned};

/// When runs start.
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// A fixed interval from the start of the previous run.
    Every(std::time::Duration),
    /// Each day at these local times.
    At(Vec<Time>),
}

/// Parses `HH:MM` or `HH:MM:SS` (24-hour clock).
pub fn parse_time_of_day(s: &str) -> Result<Time, String> {
    let t = s.trim();
    let parts: Vec<&str> = t.split(':').collect();
    let num = |p: Option<&&str>, max: i8, what: &str| -> Result<i8, String> {
        let p = p.ok_or_else(|| format!("`{s}`: expected HH:MM (24-hour clock), e.g. 02:00"))?;
        let v: i8 = p
            .parse()
            .map_err(|_| format!("`{s}`: {what} `{p}` is not a number (expected HH:MM)"))?;
        if !(0..=max).contains(&v) {
            return Err(format!("`{s}`: {what} must be 0-{max}"));
        }
        Ok(v)
    };
    if !(2..=3).contains(&parts.len()) {
        return Err(format!("`{s}`: expected HH:MM (24-hour clock), e.g. 02:00"));
    }
    let h = num(parts.first(), 23, "hour")?;
    let m = num(parts.get(1), 59, "minute")?;
    let sec = if parts.len() == 3 {
        num(parts.get(2), 59, "second")?
    } else {
        0
    };
    Time::new(h, m, sec, 0).map_err(|e| format!("`{s}`: {e}"))
}

/// The first start strictly after `now` for `--at` times, in `now`'s time zone (a time that a
/// DST change skips moves to the next valid instant, as jiff's compatible disambiguation does).
pub fn next_at(now: &Zoned, times: &[Time]) -> Option<Zoned> {
    let mut best: Option<Zoned> = None;
    for day in 0..=2 {
        let date = now.date().checked_add(jiff::Span::new().days(day)).ok()?;
        for t in times {
            let Ok(z) = date.to_datetime(*t).to_zoned(now.time_zone().clone()) else {
                continue;
            };
            if z.timestamp() > now.timestamp()
                && best.as_ref().is_none_or(|b| z.timestamp() < b.timestamp())
            {
                best = Some(z);
            }
        }
        if best.is_some() {
            break;
        }
    }
    best
}

/// When the run after one that started at `last_start` begins, seen at `now`.
pub fn next_start(
    schedule: &Schedule,
    last_start: Option<Timestamp>,
    now: &Zoned,
) -> Option<Zoned> {
    match schedule {
        Schedule::Every(d) => {
            let Some(last) = last_start else {
                return Some(now.clone());
            };
            let step = SignedDuration::try_from(*d).ok()?;
            let mut next = last.checked_add(step).ok()?;
            // A run longer than the interval: start the next at once, not a burst of catch-ups.
            if next < now.timestamp() {
                next = now.timestamp();
            }
            Some(next.to_zoned(now.time_zone().clone()))
        }
        Schedule::At(times) => next_at(now, times),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use jiff::tz::TimeZone;

    fn at(s: &str) -> Zoned {
        let ts: Timestamp = s.parse().unwrap();
        ts.to_zoned(TimeZone::UTC)
    }

    #[test]
    fn times_of_day_parse_or_say_why_not() {
        assert_eq!(
            parse_time_of_day("02:00").unwrap(),
            Time::new(2, 0, 0, 0).unwrap()
        );
        assert_eq!(
            parse_time_of_day("23:59:30").unwrap(),
            Time::new(23, 59, 30, 0).unwrap()
        );
        assert!(
            parse_time_of_day("24:00")
                .unwrap_err()
                .contains("hour must be 0-23")
        );
        assert!(parse_time_of_day("2pm").unwrap_err().contains("HH:MM"));
        assert!(parse_time_of_day("02:xx").unwrap_err().contains("minute"));
    }

    #[test]
    fn at_picks_the_next_time_today_or_tomorrow() {
        let times = vec![
            parse_time_of_day("02:00").unwrap(),
            parse_time_of_day("14:00").unwrap(),
        ];
        let n = next_at(&at("2026-11-21T10:00:00Z"), &times).unwrap();
        assert_eq!(n.timestamp().to_string(), "2026-11-21T14:00:00Z");
        let n = next_at(&at("2026-11-21T14:00:00Z"), &times).unwrap();
        assert_eq!(n.timestamp().to_string(), "2026-11-22T02:00:00Z");
    }

    #[test]
    fn every_counts_from_the_last_start_and_never_bursts() {
        let s = Schedule::Every(std::time::Duration::from_secs(6 * 3600));
        let now = at("2026-11-21T10:00:00Z");
        assert_eq!(
            next_start(&s, None, &now).unwrap().timestamp(),
            now.timestamp()
        );
        let last: Timestamp = "2026-11-21T08:00:00Z".parse().unwrap();
        assert_eq!(
            next_start(&s, Some(last), &now)
                .unwrap()
                .timestamp()
                .to_string(),
            "2026-11-21T14:00:00Z"
        );
        let long_ago: Timestamp = "2026-11-20T00:00:00Z".parse().unwrap();
        assert_eq!(
            next_start(&s, Some(long_ago), &now).unwrap().timestamp(),
            now.timestamp()
        );
    }
}
