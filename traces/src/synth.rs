//! Synthetic traces with known answers: periodic and Poisson noise, and sums of them.
//!
//! A [`Spec`] is written as one or more sources joined by `+`:
//!
//! ```text
//! periodic:period=10ms,dur=200us[,jitter=50us][,dur_jitter=20us][,phase=1ms]
//! poisson:rate=1000/s,dur=exp:5us
//! ```
//!
//! Durations take a unit (`ns`, `us`, `ms`, `s`). A run-time distribution `dur=` is one of
//! `5us` (fixed), `exp:5us` (exponential with that mean), `uniform:1us:5us`, or
//! `lognormal:5us:0.5` (median and σ of the log). `jitter` moves each periodic start by a uniform
//! amount in `[-jitter, +jitter]` (it must be under half the period); `dur_jitter` adds a uniform
//! amount in `[-dur_jitter, +dur_jitter]` to each run-time (clamped at 0).
//!
//! Each stream gets its own random generator, `StdRng::seed_from_u64(seed + stream index)`, so a
//! trace is a pure function of (spec, streams, duration, seed). The sources of a sum are drawn
//! independently and their detours united: detours that overlap (or touch) become one detour
//! spanning their union, so a sum never holds overlapping detours. A detour running past the
//! stream end is cut at the end, and detours of zero run-time are left out.

use std::fmt;
use std::str::FromStr;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal};

use crate::error::TraceError;
use crate::model::{Detour, Header, Stream, Trace};
use crate::units::{parse_duration_ns, parse_rate_per_s};

/// A distribution of run-times, ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunDist {
    /// Always the same run-time.
    Fixed(f64),
    /// Exponential with this mean.
    Exp {
        /// Mean, ns.
        mean: f64,
    },
    /// Uniform in `[lo, hi]`.
    Uniform {
        /// Lower bound, ns.
        lo: f64,
        /// Upper bound, ns.
        hi: f64,
    },
    /// Log-normal with this median and σ of the natural log.
    LogNormal {
        /// Median, ns.
        median: f64,
        /// Standard deviation of ln(run).
        sigma: f64,
    },
}

impl RunDist {
    /// The mean run-time, ns.
    pub fn mean(&self) -> f64 {
        match *self {
            RunDist::Fixed(v) => v,
            RunDist::Exp { mean } => mean,
            RunDist::Uniform { lo, hi } => (lo + hi) / 2.0,
            RunDist::LogNormal { median, sigma } => median * (sigma * sigma / 2.0).exp(),
        }
    }

    fn sample(&self, rng: &mut StdRng) -> f64 {
        match *self {
            RunDist::Fixed(v) => v,
            RunDist::Exp { mean } => Exp::new(1.0 / mean).map_or(0.0, |d| d.sample(rng)),
            RunDist::Uniform { lo, hi } => {
                if hi > lo {
                    rng.random_range(lo..=hi)
                } else {
                    lo
                }
            }
            RunDist::LogNormal { median, sigma } => {
                LogNormal::new(median.ln(), sigma).map_or(median, |d| d.sample(rng))
            }
        }
    }
}

impl fmt::Display for RunDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RunDist::Fixed(v) => write!(f, "{v}ns"),
            RunDist::Exp { mean } => write!(f, "exp:{mean}ns"),
            RunDist::Uniform { lo, hi } => write!(f, "uniform:{lo}ns:{hi}ns"),
            RunDist::LogNormal { median, sigma } => write!(f, "lognormal:{median}ns:{sigma}"),
        }
    }
}

impl FromStr for RunDist {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, TraceError> {
        let parts: Vec<&str> = s.split(':').collect();
        let d = match parts.as_slice() {
            [v] => RunDist::Fixed(parse_duration_ns(v)?),
            ["exp", m] => {
                let mean = parse_duration_ns(m)?;
                if mean <= 0.0 {
                    return Err(TraceError::Argument(format!("`{s}`: the mean must be > 0")));
                }
                RunDist::Exp { mean }
            }
            ["uniform", lo, hi] => {
                let (lo, hi) = (parse_duration_ns(lo)?, parse_duration_ns(hi)?);
                if hi < lo {
                    return Err(TraceError::Argument(format!(
                        "`{s}`: upper bound below lower"
                    )));
                }
                RunDist::Uniform { lo, hi }
            }
            ["lognormal", m, sg] => {
                let median = parse_duration_ns(m)?;
                let sigma: f64 = sg.parse().map_err(|_| {
                    TraceError::Argument(format!("`{sg}` in `{s}` is not a number"))
                })?;
                if median <= 0.0 || !(sigma.is_finite() && sigma >= 0.0) {
                    return Err(TraceError::Argument(format!(
                        "`{s}`: the median must be > 0 and σ finite and >= 0"
                    )));
                }
                RunDist::LogNormal { median, sigma }
            }
            _ => {
                return Err(TraceError::Argument(format!(
                    "`{s}` is not a run-time distribution (use 5us, exp:5us, uniform:1us:5us \
                     or lognormal:5us:0.5)"
                )))
            }
        };
        Ok(d)
    }
}

/// One source of synthetic noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source {
    /// A detour every `period_ns`, starting at `phase_ns`.
    Periodic {
        /// Period, ns.
        period_ns: f64,
        /// Run-time distribution.
        dur: RunDist,
        /// Each start moves by a uniform amount in `[-jitter, +jitter]`, ns.
        jitter_ns: f64,
        /// Each run-time changes by a uniform amount in `[-dur_jitter, +dur_jitter]`, ns.
        dur_jitter_ns: f64,
        /// Start of the first period, ns after the stream begins.
        phase_ns: f64,
    },
    /// Detours whose starts form a Poisson process.
    Poisson {
        /// Mean detours per second.
        rate_per_s: f64,
        /// Run-time distribution.
        dur: RunDist,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Source::Periodic {
                period_ns,
                dur,
                jitter_ns,
                dur_jitter_ns,
                phase_ns,
            } => {
                write!(f, "periodic:period={period_ns}ns,dur={dur}")?;
                if jitter_ns > 0.0 {
                    write!(f, ",jitter={jitter_ns}ns")?;
                }
                if dur_jitter_ns > 0.0 {
                    write!(f, ",dur_jitter={dur_jitter_ns}ns")?;
                }
                if phase_ns > 0.0 {
                    write!(f, ",phase={phase_ns}ns")?;
                }
                Ok(())
            }
            Source::Poisson { rate_per_s, dur } => {
                write!(f, "poisson:rate={rate_per_s}/s,dur={dur}")
            }
        }
    }
}

impl FromStr for Source {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, TraceError> {
        let (kind, params) = s.trim().split_once(':').ok_or_else(|| {
            TraceError::Argument(format!(
                "`{s}` is not a source (expected periodic:... or poisson:...)"
            ))
        })?;
        let mut kv = Vec::new();
        for p in params.split(',') {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| TraceError::Argument(format!("`{p}` in `{s}` is not key=value")))?;
            kv.push((k.trim(), v.trim()));
        }
        let get = |key: &str| kv.iter().find(|(k, _)| *k == key).map(|&(_, v)| v);
        let need =
            |key: &str| get(key).ok_or_else(|| TraceError::Argument(format!("`{s}` needs {key}=")));
        let check_keys = |allowed: &[&str]| -> Result<(), TraceError> {
            match kv.iter().find(|(k, _)| !allowed.contains(k)) {
                Some((k, _)) => Err(TraceError::Argument(format!(
                    "unknown parameter `{k}` in `{s}` (known: {})",
                    allowed.join(", ")
                ))),
                None => Ok(()),
            }
        };
        let opt_ns = |key: &str| get(key).map_or(Ok(0.0), parse_duration_ns);
        match kind.trim() {
            "periodic" => {
                check_keys(&["period", "dur", "jitter", "dur_jitter", "phase"])?;
                let period_ns = parse_duration_ns(need("period")?)?;
                if period_ns < 1.0 {
                    return Err(TraceError::Argument(format!(
                        "`{s}`: the period must be at least 1 ns"
                    )));
                }
                let jitter_ns = opt_ns("jitter")?;
                if jitter_ns * 2.0 >= period_ns {
                    return Err(TraceError::Argument(format!(
                        "`{s}`: jitter must be under half the period"
                    )));
                }
                let dur: RunDist = need("dur")?.parse()?;
                let dur_jitter_ns = opt_ns("dur_jitter")?;
                // The run-time a detour has at least as often as not: the fixed one, a uniform's
                // upper end, an exponential's mean, a log-normal's median.
                let typical = match dur {
                    RunDist::Fixed(v) => v,
                    RunDist::Uniform { hi, .. } => hi,
                    RunDist::Exp { mean } => mean,
                    RunDist::LogNormal { median, .. } => median,
                };
                if typical + dur_jitter_ns >= period_ns {
                    return Err(TraceError::Argument(format!(
                        "`{s}`: dur (with dur_jitter) must be shorter than the period, or the \
                         detours cover the whole stream"
                    )));
                }
                Ok(Source::Periodic {
                    period_ns,
                    dur,
                    jitter_ns,
                    dur_jitter_ns,
                    phase_ns: opt_ns("phase")?,
                })
            }
            "poisson" => {
                check_keys(&["rate", "dur"])?;
                Ok(Source::Poisson {
                    rate_per_s: parse_rate_per_s(need("rate")?)?,
                    dur: need("dur")?.parse()?,
                })
            }
            other => Err(TraceError::Argument(format!(
                "unknown source `{other}` (use periodic or poisson)"
            ))),
        }
    }
}

/// A sum of noise sources, e.g. `periodic:period=10ms,dur=200us+poisson:rate=1000/s,dur=exp:5us`.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The sources, all applied to every stream.
    pub sources: Vec<Source>,
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.sources.iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

impl FromStr for Spec {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, TraceError> {
        let sources = s
            .split('+')
            .map(str::parse)
            .collect::<Result<Vec<Source>, _>>()?;
        Ok(Spec { sources })
    }
}

/// Most detours [`synthesize`] will generate per stream (expected count), to keep memory bounded.
pub(crate) const MAX_DETOURS_PER_STREAM: f64 = 2e8;

/// Most memory [`synthesize`] may use for one trace, bytes.
pub(crate) const MAX_SYNTH_BYTES: u64 = 4 << 30;

const GIB: f64 = (1u64 << 30) as f64;

/// Memory a trace of `streams` streams of `detours` detours each takes while synthesised:
/// the records, the detours they are built from, and each stream's own size.
fn estimated_bytes(detours: f64, streams: u32) -> f64 {
    let per_detour = (std::mem::size_of::<crate::model::Record>()
        + std::mem::size_of::<crate::model::Detour>()) as f64;
    f64::from(streams) * (detours.max(1.0) * per_detour + std::mem::size_of::<Stream>() as f64)
}

impl Spec {
    /// Expected number of detours per stream over `duration_ns` (before overlaps are united).
    pub(crate) fn expected_detours(&self, duration_ns: u64) -> f64 {
        let d = duration_ns as f64;
        self.sources
            .iter()
            .map(|s| match *s {
                Source::Periodic {
                    period_ns,
                    phase_ns,
                    ..
                } => ((d - phase_ns) / period_ns).ceil().max(0.0),
                Source::Poisson { rate_per_s, .. } => rate_per_s * d / 1e9,
            })
            .sum()
    }
}

/// Generates the detours of one stream over `[0, duration_ns)`.
pub(crate) fn stream_detours(spec: &Spec, duration_ns: u64, seed: u64) -> Vec<Detour> {
    let mut rng = StdRng::seed_from_u64(seed);
    let end = duration_ns as f64;
    let mut raw: Vec<(f64, f64)> = Vec::new();
    for src in &spec.sources {
        match *src {
            Source::Periodic {
                period_ns,
                dur,
                jitter_ns,
                dur_jitter_ns,
                phase_ns,
            } => {
                let mut k = 0u64;
                loop {
                    let nominal = phase_ns + k as f64 * period_ns;
                    if nominal >= end {
                        break;
                    }
                    k += 1;
                    let j = if jitter_ns > 0.0 {
                        rng.random_range(-jitter_ns..=jitter_ns)
                    } else {
                        0.0
                    };
                    let dj = if dur_jitter_ns > 0.0 {
                        rng.random_range(-dur_jitter_ns..=dur_jitter_ns)
                    } else {
                        0.0
                    };
                    let run = (dur.sample(&mut rng) + dj).max(0.0);
                    raw.push(((nominal + j).max(0.0), run));
                }
            }
            Source::Poisson { rate_per_s, dur } => {
                let gap = Exp::new(rate_per_s / 1e9).expect("rate is checked positive");
                let mut t = gap.sample(&mut rng);
                while t < end {
                    raw.push((t, dur.sample(&mut rng)));
                    t += gap.sample(&mut rng);
                }
            }
        }
    }
    raw.sort_by(|a, b| a.0.total_cmp(&b.0));
    unite(&raw, duration_ns)
}

/// Rounds to ns, cuts at the end, drops empty detours and unites overlapping ones.
fn unite(raw: &[(f64, f64)], duration_ns: u64) -> Vec<Detour> {
    crate::model::unite(raw.iter().map(|&(s, r)| {
        let start = (s.round() as u64).min(duration_ns);
        let end = ((s + r).round() as u64).min(duration_ns);
        Detour {
            start_ns: start,
            run_ns: end.saturating_sub(start),
        }
    }))
}

/// Builds a trace of `streams` streams (CPUs 0..n) over `[0, duration_ns)` from `spec`.
///
/// ```
/// use jitter_trace::synth::{synthesize, Spec};
///
/// // A 120 µs detour every 4 ms on two CPUs for one second: 250 detours each.
/// let spec: Spec = "periodic:period=4ms,dur=120us".parse()?;
/// let trace = synthesize(&spec, 2, 1_000_000_000, 3)?;
/// assert_eq!(trace.streams.len(), 2);
/// for s in &trace.streams {
///     assert_eq!(s.records.len(), 250);
///     assert!(s.records.iter().all(|d| d.run_ns == 120_000));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn synthesize(
    spec: &Spec,
    streams: u32,
    duration_ns: u64,
    seed: u64,
) -> Result<Trace, TraceError> {
    if streams == 0 {
        return Err(TraceError::Argument(
            "a trace needs at least one stream".into(),
        ));
    }
    for src in &spec.sources {
        if let Source::Periodic { phase_ns, .. } = *src {
            // The phase names a time that must be inside the trace (`crate::names`).
            crate::names::time_within(
                &format!("`{src}`: phase"),
                phase_ns.round() as u64,
                duration_ns,
                "a trace of this --duration",
                "the source would make no detour (give a phase below the duration)",
            )?;
        }
    }
    let expected = spec.expected_detours(duration_ns);
    if expected > MAX_DETOURS_PER_STREAM {
        return Err(TraceError::Argument(format!(
            "`{spec}` over {duration_ns} ns makes about {expected:.3e} detours per stream, over \
             the limit of {MAX_DETOURS_PER_STREAM:.0e}"
        )));
    }
    let bytes = estimated_bytes(expected, streams);
    if bytes > MAX_SYNTH_BYTES as f64 {
        let per_stream = estimated_bytes(expected, 1);
        let fit = (MAX_SYNTH_BYTES as f64 / per_stream).floor().max(0.0);
        return Err(TraceError::Argument(format!(
            "{streams} streams of about {expected:.3e} detours each need about {:.1} GiB, over \
             the limit of {} GiB: use at most {fit:.0} streams, or a shorter duration",
            bytes / GIB,
            MAX_SYNTH_BYTES as f64 / GIB
        )));
    }
    let mut trace = Trace {
        header: Header {
            tool_version: crate::TOOL_VERSION.into(),
            host: "synthetic".into(),
            ..Header::default()
        },
        ..Trace::default()
    };
    for cpu in 0..streams {
        let ds = stream_detours(spec, duration_ns, seed.wrapping_add(u64::from(cpu)));
        trace
            .streams
            .push(Stream::from_detours(cpu, 0, duration_ns, &ds)?);
    }
    trace
        .header
        .labels
        .insert("synthetic".into(), spec.to_string());
    trace.header.labels.insert("seed".into(), seed.to_string());
    trace.sync_header();
    trace.validate()?;
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print() {
        let s: Spec = "periodic:period=10ms,dur=200us+poisson:rate=1000/s,dur=exp:5us"
            .parse()
            .unwrap();
        assert_eq!(s.sources.len(), 2);
        assert_eq!(
            s.to_string(),
            "periodic:period=10000000ns,dur=200000ns+poisson:rate=1000/s,dur=exp:5000ns"
        );
        let again: Spec = s.to_string().parse().unwrap();
        assert_eq!(again, s);
        let l: Spec = "poisson:rate=5/ms,dur=lognormal:2us:0.5".parse().unwrap();
        assert_eq!(l.to_string().parse::<Spec>().unwrap(), l);
    }

    #[test]
    fn bad_specs_say_why() {
        let e = "periodic:period=10parsecs,dur=1us"
            .parse::<Spec>()
            .unwrap_err();
        assert!(e.to_string().contains("unknown unit `parsecs`"), "{e}");
        let e = "periodic:dur=1us".parse::<Spec>().unwrap_err();
        assert!(e.to_string().contains("needs period="), "{e}");
        let e = "periodic:period=1ms,dur=1us,colour=red"
            .parse::<Spec>()
            .unwrap_err();
        assert!(e.to_string().contains("unknown parameter `colour`"), "{e}");
        assert!("gaussian:rate=1/s".parse::<Spec>().is_err());
        assert!("periodic:period=1ms,dur=1us,jitter=600us"
            .parse::<Spec>()
            .is_err());
    }

    #[test]
    fn periodic_is_exact() {
        let s: Spec = "periodic:period=1ms,dur=10us,phase=500us".parse().unwrap();
        let ds = stream_detours(&s, 10_000_000, 1);
        assert_eq!(ds.len(), 10);
        assert_eq!(
            ds[0],
            Detour {
                start_ns: 500_000,
                run_ns: 10_000
            }
        );
        assert_eq!(ds[9].start_ns, 9_500_000);
    }

    #[test]
    fn same_seed_same_trace_other_seed_other_trace() {
        let s: Spec = "poisson:rate=10000/s,dur=exp:3us".parse().unwrap();
        let a = synthesize(&s, 2, 100_000_000, 7).unwrap();
        let b = synthesize(&s, 2, 100_000_000, 7).unwrap();
        let c = synthesize(&s, 2, 100_000_000, 8).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.streams[0].records, c.streams[0].records);
        assert_ne!(a.streams[0].records, a.streams[1].records);
        assert!(a.header.labels["synthetic"].starts_with("poisson:"));
    }

    #[test]
    fn a_periodic_detour_as_long_as_its_period_is_refused() {
        for spec in [
            "periodic:period=1ms,dur=2ms",
            "periodic:period=1ms,dur=1ms",
            "periodic:period=1ms,dur=600us,dur_jitter=400us",
            "periodic:period=1ms,dur=uniform:1us:1ms",
            "periodic:period=1ms,dur=exp:1ms",
        ] {
            let e = spec.parse::<Spec>().unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "`{spec}`: dur (with dur_jitter) must be shorter than the period, or the \
                     detours cover the whole stream"
                )
            );
        }
        "periodic:period=1ms,dur=999us".parse::<Spec>().unwrap();
    }

    #[test]
    fn huge_requests_are_refused() {
        let s: Spec = "periodic:period=1ns,dur=0ns".parse().unwrap();
        let e = synthesize(&s, 1, 1_000_000_000, 0).unwrap_err();
        assert!(e.to_string().contains("over the limit"), "{e}");
    }

    #[test]
    fn sums_unite_overlaps() {
        let raw = [
            (0.0, 10.0),
            (5.0, 10.0),
            (15.0, 1.0),
            (20.0, 0.0),
            (30.0, 5.0),
        ];
        let d = unite(&raw, 32);
        assert_eq!(
            d,
            vec![
                Detour {
                    start_ns: 0,
                    run_ns: 16
                },
                Detour {
                    start_ns: 30,
                    run_ns: 2
                }
            ]
        );
    }

    #[test]
    fn poisson_rate_is_close_to_nominal() {
        // 1 s at 10 000/s: count ~ Poisson(10 000), sd 100; 5 sd = 500.
        let s: Spec = "poisson:rate=10000/s,dur=100ns".parse().unwrap();
        let n = stream_detours(&s, 1_000_000_000, 3).len() as f64;
        assert!((n - 10_000.0).abs() < 500.0, "{n}");
    }
}
