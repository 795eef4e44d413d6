//! How the binaries log: `tracing` events to standard error, filtered by `RUST_LOG` (`info` when
//! it is unset or does not parse), stamped with the process's clock (so a dilated process's log
//! lines carry the times its METRICS lines do). The replica and the client set it up the same
//! way, here.

use std::fmt;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::EnvFilter;

/// Installs the process-wide subscriber; call once, first thing in `main`.
pub fn init() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_timer(ProcessClock)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
}

/// The time of a log line, read from `plumbing::clock`, as UTC with milliseconds.
struct ProcessClock;

impl FormatTime for ProcessClock {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        write!(w, "{}", UtcMillis(plumbing::clock::now_ms()))
    }
}

/// Milliseconds since the Unix epoch written as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
struct UtcMillis(u64);

impl fmt::Display for UtcMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (days, ms_of_day) = (self.0 / 86_400_000, self.0 % 86_400_000);
        let (year, month, day) = civil_date(days);
        let seconds = ms_of_day / 1000;
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60,
            ms_of_day % 1000
        )
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01: eras of 400 years (146,097
/// days) counted from 0000-03-01, so that the leap day ends a year.
fn civil_date(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_are_written_as_a_utc_date() {
        assert_eq!(UtcMillis(0).to_string(), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day of a century year divisible by 400) 23:59:59.999.
        assert_eq!(
            UtcMillis(951_868_799_999).to_string(),
            "2000-02-29T23:59:59.999Z"
        );
        assert_eq!(
            UtcMillis(1_795_869_296_123).to_string(),
            "2026-11-28T12:34:56.123Z"
        );
        // 2100 is not a leap year: 28 February is followed by 1 March.
        assert_eq!(
            UtcMillis(4_107_542_400_000).to_string(),
            "2100-03-01T00:00:00.000Z"
        );
    }
}
