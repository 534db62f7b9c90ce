//! Times and durations at the edge of what gpuplan can print. RFC 3339, as humantime
//! writes it, ends at [`LAST`] (9999-12-31T23:59:59Z): humantime panics past it. So
//! inputs that could carry a clock past it are refused where they are read (durations
//! longer than [`MAX_DURATION`], `GPUPLAN_SIM_START`, a sim clock moved past it), and
//! [`rfc3339_ms`] never panics.

use std::time::{Duration, UNIX_EPOCH};

/// The last time gpuplan can print, in ms since the epoch: 9999-12-31T23:59:59Z.
pub const LAST_MS: u64 = 253_402_300_799_000;
/// [`LAST_MS`] as printed.
pub const LAST: &str = "9999-12-31T23:59:59Z";

/// The longest duration gpuplan takes (`1000years` as humantime counts a year, 365.25
/// days): far beyond any runtime, cooldown or interval, and short enough that a clock of
/// this millennium moved by it is still printable. A sim clock that several such moves
/// would carry past [`LAST`] is refused when it moves (`SimCloud::advance`).
pub const MAX_DURATION: Duration = Duration::from_secs(1000 * 31_557_600);
/// [`MAX_DURATION`] as users write it.
pub const MAX_DURATION_TEXT: &str = "1000years";

/// `ms` since the epoch as RFC 3339 (seconds). Never panics: a time past [`LAST`] prints
/// as [`LAST`]. Every source of such a time is refused where it is read, so this is only
/// the backstop that keeps a missed one from crashing a command halfway through a write.
pub fn rfc3339_ms(ms: u64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(ms.min(LAST_MS));
    humantime::format_rfc3339_seconds(at).to_string()
}

/// A duration as users write it (`90s`, `2h 30m`), at most [`MAX_DURATION`].
pub fn duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| e.to_string())?;
    check_duration(d)?;
    Ok(d)
}

/// Refuse a duration longer than [`MAX_DURATION`].
pub fn check_duration(d: Duration) -> Result<(), String> {
    if d > MAX_DURATION {
        return Err(format!(
            "{} is longer than the {MAX_DURATION_TEXT} gpuplan counts (its clocks end at {LAST})",
            humantime::format_duration(d)
        ));
    }
    Ok(())
}

/// Refuse a time (ms since the epoch) past [`LAST`]; `what` names it in the message.
pub fn check_ms(ms: u64, what: &str) -> Result<(), String> {
    if ms > LAST_MS {
        return Err(format!("{what} would be past {LAST}, the last time gpuplan can print"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_printable_time_prints_and_later_ones_do_not_panic() {
        assert_eq!(rfc3339_ms(LAST_MS), LAST);
        assert_eq!(rfc3339_ms(u64::MAX), LAST);
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00Z");
        assert!(check_ms(LAST_MS, "the clock").is_ok());
        let e = check_ms(LAST_MS + 1000, "the sim clock").unwrap_err();
        assert!(e.contains("the sim clock would be past 9999-12-31T23:59:59Z"), "{e}");
    }

    #[test]
    fn durations_longer_than_a_thousand_years_are_refused() {
        assert_eq!(duration("1000years"), Ok(MAX_DURATION));
        assert_eq!(duration(" 90m "), Ok(Duration::from_secs(5400)));
        let e = duration("8000years").unwrap_err();
        assert!(e.contains("8000years is longer than the 1000years"), "{e}");
        assert!(duration("nope").is_err());
        // Past what humantime counts at all: its own error, no panic.
        assert!(duration("99999999999999999999years").is_err());
    }
}
