//! Names and stretches a user gives that must exist in the input: a source, label, kind or
//! category of an attribution, a CPU of a trace, a window of its time, the phase of a
//! synthetic source. One rule for every command: a name that matches nothing in the input, or
//! a window that holds none of it, is refused with one line that says what the input has,
//! before anything is written. A typo never becomes a result that silently left it out (a
//! `--drop` of an unknown source writing the trace unchanged under a "filtered" label, a
//! `--keep` of one writing a noise-free trace).

use crate::error::TraceError;
use crate::units::format_ns;

/// Most names an error lists before "and N more".
const LISTED: usize = 12;

/// `present` as an error lists it: the first [`LISTED`], then how many more.
pub(crate) fn listed<S: AsRef<str>>(present: &[S]) -> String {
    if present.is_empty() {
        return "none".into();
    }
    let mut s: Vec<&str> = present.iter().take(LISTED).map(AsRef::as_ref).collect();
    let more = present.len().saturating_sub(LISTED);
    let more = (more > 0).then(|| format!("and {more} more"));
    s.extend(more.as_deref());
    s.join(", ")
}

/// The error for `asked` (given with `flag`) that names no `kind` of `input`, which has
/// `present` (`hint`: where the full list is, or what to do).
pub fn absent<S: AsRef<str>>(
    flag: &str,
    asked: &str,
    kind: &str,
    input: &str,
    present: &[S],
    hint: &str,
) -> TraceError {
    let hint = if hint.is_empty() {
        String::new()
    } else {
        format!("; {hint}")
    };
    // A number reads as itself (`CPU 7`), a name in quotes (`source `task:x``).
    let named = if asked.bytes().all(|b| b.is_ascii_digit()) {
        asked.to_string()
    } else {
        format!("`{asked}`")
    };
    TraceError::Argument(format!(
        "{flag} {asked}: {input} has no {kind} {named} (it has {}){hint}",
        listed(present)
    ))
}

/// Each of `asked` must match something of `present` (by `matches`), else the error of
/// [`absent`] for the first that does not.
pub(crate) fn each_present<A: std::fmt::Display, S: AsRef<str>>(
    flag: &str,
    asked: &[A],
    matched: impl Fn(&A) -> bool,
    kind: &str,
    input: &str,
    present: &[S],
    hint: &str,
) -> Result<(), TraceError> {
    match asked.iter().find(|a| !matched(a)) {
        None => Ok(()),
        Some(a) => Err(absent(flag, &a.to_string(), kind, input, present, hint)),
    }
}

/// A window `[from_ns, to_ns)` from the input's start (given with `flag`) must hold some of
/// the input's `span_ns`.
pub(crate) fn window_within(
    flag: &str,
    from_ns: u64,
    to_ns: u64,
    span_ns: u64,
    input: &str,
) -> Result<(), TraceError> {
    if from_ns < span_ns && to_ns > from_ns {
        return Ok(());
    }
    Err(TraceError::Argument(format!(
        "{flag} {}..{}: {input} lasts {} from its start, so the window holds none of it",
        format_ns(from_ns as f64),
        format_ns(to_ns as f64),
        format_ns(span_ns as f64)
    )))
}

/// A range of run-times `[lo_ns, hi_ns)` (given with `flag`) that holds none of the
/// `detours` of `input`.
pub fn no_run_time_in(flag: &str, lo_ns: u64, hi_ns: u64, input: &str, detours: u64) -> TraceError {
    TraceError::Argument(format!(
        "{flag} {}..{}: none of the {detours} detours of {input} has a run-time in it",
        format_ns(lo_ns as f64),
        format_ns(hi_ns as f64)
    ))
}

/// A time `at_ns` from the input's start (given with `flag`) must fall inside its `span_ns`;
/// `then` says what would follow from one outside (`the source would make no detour`).
pub(crate) fn time_within(
    flag: &str,
    at_ns: u64,
    span_ns: u64,
    input: &str,
    then: &str,
) -> Result<(), TraceError> {
    if at_ns < span_ns {
        return Ok(());
    }
    Err(TraceError::Argument(format!(
        "{flag} {}: {input} lasts {} from its start, so {then}",
        format_ns(at_ns as f64),
        format_ns(span_ns as f64)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_name_lists_what_the_input_has_and_cuts_a_long_list() {
        let e = absent(
            "--drop",
            "task:nope",
            "source",
            "t.jtr",
            &["timer", "sched"],
            "",
        );
        assert_eq!(
            e.to_string(),
            "--drop task:nope: t.jtr has no source `task:nope` (it has timer, sched)"
        );
        let many: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
        assert!(
            listed(&many).ends_with("s11, and 8 more"),
            "{}",
            listed(&many)
        );
        assert_eq!(listed::<&str>(&[]), "none");
        let asked = ["timer", "nope"];
        let e = each_present(
            "--keep",
            &asked,
            |a| *a == "timer",
            "source",
            "t.jtr",
            &["timer"],
            "see jitter-trace attribution t.jtr",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("(it has timer); see jitter-trace attribution t.jtr"),
            "{e}"
        );
    }

    #[test]
    fn a_window_must_hold_some_of_the_input() {
        window_within("--window", 0, 10, 5, "t.jtr").unwrap();
        window_within("--window", 4, 100, 5, "t.jtr").unwrap();
        let e = window_within(
            "--window",
            100_000_000_000,
            200_000_000_000,
            5_000_000_000,
            "t.jtr",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--window 100.000 s..200.000 s: t.jtr lasts 5.000 s from its start, so the window \
             holds none of it"
        );
        assert!(window_within("--window", 5, 6, 5, "t.jtr").is_err());
        time_within("phase", 4, 5, "the trace", "x").unwrap();
        let e = no_run_time_in("--bucket", 1_000_000_000, 2_000_000_000, "t", 7);
        assert_eq!(
            e.to_string(),
            "--bucket 1.000 s..2.000 s: none of the 7 detours of t has a run-time in it"
        );
        let e = time_within(
            "phase",
            5_000_000_000,
            2_000_000_000,
            "the trace",
            "nothing",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "phase 5.000 s: the trace lasts 2.000 s from its start, so nothing"
        );
    }
}
