//! UTC timestamps for result files (ISO-8601), without a date library.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, now.
pub fn unix_now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for a Unix time.
pub fn iso8601_utc(unix_s: f64) -> String {
    let ms_total = (unix_s * 1000.0).round() as i64;
    let (secs, ms) = (ms_total.div_euclid(1000), ms_total.rem_euclid(1000));
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// `YYYY-MM-DDTHH-MM-SS` (UTC), for directory names (seed 001).
pub fn dir_stamp_utc(unix_s: f64) -> String {
    let s = iso8601_utc(unix_s);
    s.get(..19).unwrap_or(&s).replace(':', "-")
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(iso8601_utc(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_utc(951_782_400.5), "2000-02-29T00:00:00.500Z");
        assert_eq!(iso8601_utc(1_795_000_000.0), "2026-11-18T11:06:40.000Z");
        assert_eq!(dir_stamp_utc(1_795_000_000.0), "2026-11-18T11-06-40");
    }
}
