//! Durations and rates as people type them: `200us`, `1.5ms`, `1000/s`.

use crate::error::TraceError;

/// Units a duration may carry, with their length in ns.
const DURATION_UNITS: [(&str, f64); 9] = [
    ("ns", 1.0),
    ("us", 1e3),
    ("µs", 1e3),
    ("ms", 1e6),
    ("s", 1e9),
    ("m", 60e9),
    ("min", 60e9),
    ("h", 3600e9),
    ("d", 86400e9),
];

/// Parses a non-negative duration with a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`/`min`, `h`, `d`)
/// into ns.
pub fn parse_duration_ns(text: &str) -> Result<f64, TraceError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')))
        .unwrap_or(t.len());
    // `1e3us` vs `5s`: an `e` that is followed by a letter belongs to no number, but units never
    // start with `e`, so the split above is unambiguous.
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(TraceError::Argument(format!(
            "`{text}` is not a duration (expected a number with a unit, e.g. 200us)"
        )));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| TraceError::Argument(format!("`{num}` in `{text}` is not a number")))?;
    if unit.is_empty() && value == 0.0 {
        return Ok(0.0); // zero is zero in every unit
    }
    if unit.is_empty() {
        return Err(TraceError::Argument(format!(
            "`{text}` has no unit (use ns, us, ms, s or min)"
        )));
    }
    let Some(&(_, factor)) = DURATION_UNITS.iter().find(|(u, _)| *u == unit) else {
        return Err(TraceError::Argument(format!(
            "unknown unit `{unit}` in `{text}` (use ns, us, ms, s or min)"
        )));
    };
    let ns = value * factor;
    if !ns.is_finite() || ns < 0.0 {
        return Err(TraceError::Argument(format!(
            "duration `{text}` must be finite and not negative"
        )));
    }
    Ok(ns)
}

/// Parses a rate (`1000/s`, `5/ms`, `250` meaning per second) into events per second.
pub(crate) fn parse_rate_per_s(text: &str) -> Result<f64, TraceError> {
    let t = text.trim();
    let (num, per) = match t.split_once('/') {
        Some((n, u)) => (n, Some(u)),
        None => (t, None),
    };
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| TraceError::Argument(format!("`{num}` in rate `{text}` is not a number")))?;
    let per_s = match per {
        None => 1.0,
        Some(u) => {
            let u = u.trim();
            let unit_ns = DURATION_UNITS
                .iter()
                .find(|(name, _)| *name == u)
                .map(|&(_, f)| f)
                .ok_or_else(|| {
                    TraceError::Argument(format!(
                        "unknown unit `{u}` in rate `{text}` (use /ns, /us, /ms, /s or /min)"
                    ))
                })?;
            1e9 / unit_ns
        }
    };
    let rate = value * per_s;
    if !rate.is_finite() || rate <= 0.0 {
        return Err(TraceError::Argument(format!(
            "rate `{text}` must be finite and positive"
        )));
    }
    Ok(rate)
}

/// Parses a length of time given on a command line: `10s`, `500ms`, `2m`, `1h`, or a plain
/// number of seconds; it must be positive and at most ~31 years.
pub fn parse_positive_duration(text: &str) -> Result<std::time::Duration, TraceError> {
    let t = text.trim();
    let body = t.strip_prefix(['-', '+']).unwrap_or(t);
    let ns = if !body.is_empty() && body.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let secs: f64 = t
            .parse()
            .map_err(|_| TraceError::Argument(format!("`{text}` is not a duration")))?;
        secs * 1e9
    } else {
        parse_duration_ns(t)?
    };
    if !(ns.is_finite() && ns > 0.0) {
        return Err(TraceError::Argument(format!(
            "the duration must be positive, got `{text}`"
        )));
    }
    if ns > 1e18 {
        return Err(TraceError::Argument(format!(
            "the duration `{text}` is too long"
        )));
    }
    Ok(std::time::Duration::from_nanos(ns.round() as u64))
}

/// Formats ns with a unit chosen so that the number reads easily (`1.50 ms`).
pub fn format_ns(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration_ns("200us").unwrap(), 200e3);
        assert_eq!(parse_duration_ns("1.5ms").unwrap(), 1.5e6);
        assert_eq!(parse_duration_ns("10s").unwrap(), 10e9);
        assert_eq!(parse_duration_ns("7ns").unwrap(), 7.0);
        assert_eq!(parse_duration_ns("2µs").unwrap(), 2e3);
        assert_eq!(parse_duration_ns("1e3ns").unwrap(), 1e3);
        assert_eq!(parse_duration_ns("0").unwrap(), 0.0);
    }

    #[test]
    fn bad_durations_say_why() {
        let e = parse_duration_ns("5parsecs").unwrap_err().to_string();
        assert!(e.contains("unknown unit `parsecs`"), "{e}");
        let e = parse_duration_ns("5").unwrap_err().to_string();
        assert!(e.contains("no unit"), "{e}");
        assert!(parse_duration_ns("-5us").is_err());
        assert!(parse_duration_ns("us").is_err());
    }

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rate_per_s("1000/s").unwrap(), 1000.0);
        assert_eq!(parse_rate_per_s("2/ms").unwrap(), 2000.0);
        assert_eq!(parse_rate_per_s("250").unwrap(), 250.0);
        assert!(parse_rate_per_s("3/fortnight").is_err());
        assert!(parse_rate_per_s("0/s").is_err());
    }

    #[test]
    fn formats_pick_a_unit() {
        assert_eq!(format_ns(1500.0), "1.50 us");
        assert_eq!(format_ns(12.0), "12 ns");
        assert_eq!(format_ns(2.5e9), "2.500 s");
    }

    #[test]
    fn command_line_durations_take_plain_seconds_and_refuse_nonsense() {
        use std::time::Duration;
        assert_eq!(
            parse_positive_duration("3").unwrap(),
            Duration::from_secs(3)
        );
        assert_eq!(
            parse_positive_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(
            parse_positive_duration("2m").unwrap(),
            Duration::from_secs(120)
        );
        assert_eq!(
            parse_positive_duration("1h").unwrap(),
            Duration::from_secs(3600)
        );
        assert_eq!(
            parse_positive_duration("1.5s").unwrap(),
            Duration::from_millis(1500)
        );
        for bad in ["", "0", "-1", "0s", "-1s", "x", "3 parsecs", "nan", "1e30s"] {
            assert!(parse_positive_duration(bad).is_err(), "{bad}");
        }
        let e = parse_positive_duration("-3").unwrap_err().to_string();
        assert!(e.contains("positive"), "{e}");
    }
}
