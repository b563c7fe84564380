//! The platform's day: Workers Free allows an account a fixed number of
//! SQLite rows written per day, reset at 00:00 UTC, and refuses every write
//! past it until then. This module reckons UTC days from a clock reading
//! (no I/O, no calendar dependency): which day a time falls in, when the
//! next one starts, how long a refused caller should wait, and what a day's
//! writes so far project for the whole day.

/// SQLite rows written per day that Workers Free allows one account
/// (Durable Objects pricing): past it, every write fails until 00:00 UTC.
pub const WORKER_FREE_ROWS_WRITTEN_PER_DAY: u64 = 100_000;

/// Milliseconds in a UTC day (the platform's daily limits reset at 00:00 UTC;
/// UTC days have no leap seconds in Unix time).
pub const DAY_MS: u64 = 86_400_000;

/// Shortest stretch of a day a projection divides by, ms (1 hour): a burst
/// in the first minutes after midnight would otherwise project hundreds of
/// times itself.
pub const PROJECTION_MIN_ELAPSED_MS: u64 = 3_600_000;

/// Longest a count may wait in memory before an alarm writes it, ms
/// (5 minutes): an object restarted (evicted, redeployed) loses the counts
/// it had not written, so this bounds the loss to the last few minutes of
/// activity, while writing them costs at most one row per source per
/// interval (288 a day, under 0.3% of the Free allowance).
pub const UNWRITTEN_COUNTS_MAX_AGE_MS: u64 = 300_000;

/// The UTC day `ms` falls in, counted from 1970-01-01 (day 0).
pub fn utc_day(ms: u64) -> u64 {
    ms / DAY_MS
}

/// When the UTC day after the one `ms` falls in starts, ms since the epoch.
pub fn next_utc_day_ms(ms: u64) -> u64 {
    (utc_day(ms) + 1) * DAY_MS
}

/// Whole seconds from `ms` until the next UTC day starts, rounded up and at
/// least 1: a `Retry-After` that lands on or after 00:00 UTC.
pub fn seconds_until_next_utc_day(ms: u64) -> u32 {
    let wait_ms = next_utc_day_ms(ms) - ms;
    // At most DAY_MS / 1000 = 86,400: always fits.
    u32::try_from(wait_ms.div_ceil(1_000)).unwrap_or(u32::MAX).max(1)
}

/// The date of UTC day `day` as `YYYY-MM-DD` (proleptic Gregorian).
pub fn utc_date(day: u64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Year, month and day of the `day`th day after 1970-01-01: Howard
/// Hinnant's `civil_from_days`, for days on or after the epoch.
fn civil_from_days(day: u64) -> (u64, u64, u64) {
    let z = day + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// What `written` rows so far today, at `now_ms`, project for the whole UTC
/// day at the same rate. The elapsed part of the day counts as at least
/// [`PROJECTION_MIN_ELAPSED_MS`].
pub fn projected_for_day(written: u64, now_ms: u64) -> u64 {
    let elapsed = (now_ms % DAY_MS).max(PROJECTION_MIN_ELAPSED_MS);
    let projected = u128::from(written) * u128::from(DAY_MS) / u128::from(elapsed);
    u64::try_from(projected).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-02T17:30:00Z.
    const T: u64 = 1_796_232_600_000;

    #[test]
    fn days_start_at_midnight_utc() {
        assert_eq!(utc_date(utc_day(T)), "2026-12-02");
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(utc_day(951_782_400_000)), "2000-02-29", "a leap day");
        assert_eq!(utc_date(utc_day(next_utc_day_ms(T))), "2026-12-03");
        assert_eq!(next_utc_day_ms(T) % DAY_MS, 0);
        let midnight = next_utc_day_ms(T);
        assert_eq!(utc_day(midnight - 1), utc_day(T), "the last ms of a day is that day");
        assert_eq!(next_utc_day_ms(midnight), midnight + DAY_MS, "at 00:00 the next day is a day away");
    }

    #[test]
    fn a_retry_after_lands_at_or_after_the_next_day() {
        assert_eq!(seconds_until_next_utc_day(T), 6 * 3_600 + 30 * 60);
        let midnight = next_utc_day_ms(T);
        assert_eq!(seconds_until_next_utc_day(midnight - 1), 1, "rounded up, never 0");
        assert_eq!(seconds_until_next_utc_day(midnight - 1_001), 2);
        assert_eq!(seconds_until_next_utc_day(midnight), 86_400, "at the edge: a whole day");
        for ms in [T, midnight - 1, midnight, midnight + 1] {
            let s = u64::from(seconds_until_next_utc_day(ms));
            assert!(ms + s * 1_000 >= next_utc_day_ms(ms) && s <= 86_400);
        }
    }

    #[test]
    fn a_projection_scales_the_day_so_far_and_divides_by_at_least_an_hour() {
        let midnight = next_utc_day_ms(T) - DAY_MS;
        assert_eq!(projected_for_day(1_000, midnight + DAY_MS / 2), 2_000, "half a day: twice");
        assert_eq!(projected_for_day(1_000, midnight + 60_000), 24_000, "one minute in: as if an hour");
        assert_eq!(projected_for_day(1_000, midnight + PROJECTION_MIN_ELAPSED_MS), 24_000);
        assert_eq!(projected_for_day(1_000, midnight + DAY_MS - 1), 1_000, "the day's end: itself");
        assert_eq!(projected_for_day(u64::MAX, midnight), u64::MAX, "saturates");
    }
}
