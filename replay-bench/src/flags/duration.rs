//! The duration flags' value parsers: `jitter_trace::units`' one rule for a duration, in ns,
//! at most a day (the longest any option of `replay-bench` takes).

/// Longest duration any option takes, ns (one day).
pub(crate) const MAX_DURATION_NS: f64 = 86_400e9;

/// A duration flag of the benchmark, ns: `jitter_trace::units`' rule, at most a day.
pub(crate) fn duration_flag(s: &str) -> Result<u64, String> {
    let ns = jitter_trace::units::parse_duration_ns(s).map_err(|e| e.to_string())?;
    within_a_day(s, ns)
}

/// A positive duration flag, ns: `jitter_trace::units::parse_positive_duration`, at most a day.
pub(crate) fn positive_duration_flag(s: &str) -> Result<u64, String> {
    let d = jitter_trace::units::parse_positive_duration(s).map_err(|e| e.to_string())?;
    within_a_day(s, d.as_nanos() as f64)
}

fn within_a_day(s: &str, ns: f64) -> Result<u64, String> {
    if ns > MAX_DURATION_NS {
        return Err(format!("`{s}` is longer than the limit of 1d"));
    }
    Ok(ns.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_flags_follow_the_one_rule_and_stop_at_a_day() {
        assert_eq!(positive_duration_flag("1ms"), Ok(1_000_000));
        assert!(positive_duration_flag("0ms").is_err());
        assert!(positive_duration_flag("-1ms").is_err());
        // A plain number is seconds, as everywhere (`jitter_trace::units`).
        assert_eq!(positive_duration_flag("1"), Ok(1_000_000_000));
        assert!(positive_duration_flag("2d").is_err());
        assert_eq!(duration_flag("0s"), Ok(0));
        assert_eq!(duration_flag("0"), Ok(0));
        assert!(duration_flag("2d").is_err());
    }
}
