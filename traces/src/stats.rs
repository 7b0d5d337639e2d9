//! Statistics of detours: rates, noise ratio, quantiles of run-times and injectability.
//!
//! Run-times are summarised by [`crate::summary::DetourHistogram`] (also the collector's end
//! table): quantiles and the MAD within 0.1 %; `min`, `max`, `mean`, the noise ratio and the
//! fractions under 1/5/14 µs exact.
//!
//! Every statistic is also gathered in one pass over a trace file in constant memory in its
//! length ([`StatsSink`] over [`crate::scan::scan_trace`]: one histogram per stream, the
//! overall one merged from them), with results equal to those of the trace held in memory:
//! histograms, sums and counts add up exactly. The smallest scale covering a share needs the
//! k-th longest detour exactly: [`kth_longest`] finds it in a few more passes (16 bits of the
//! run-time per pass), never holding the run-times.

use serde::{Deserialize, Serialize};

use crate::error::TraceError;
use crate::model::{Detour, Stream, Trace};
use crate::scan::{ChunkSink, Scan};
use crate::summary::DetourHistogram;
use crate::table::Table;

/// Statistics of one stream, or of all streams of a trace together.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Stats {
    /// CPU of the stream; `None` for the summary over all streams.
    pub cpu: Option<u32>,
    /// Number of detours.
    pub count: u64,
    /// Observation time, ns (summed over streams for the overall summary: CPU-time observed).
    pub duration_ns: u64,
    /// Detours per second of observation (per CPU for the overall summary).
    pub detours_per_s: f64,
    /// Sum of run-times, ns.
    pub noise_ns: u64,
    /// Sum of run-times over observation time.
    pub noise_ratio: f64,
    /// Shortest run-time, ns.
    pub min_ns: u64,
    /// 20th percentile of run-times, ns.
    pub p20_ns: u64,
    /// Median run-time, ns.
    pub median_ns: u64,
    /// Mean run-time, ns.
    pub mean_ns: f64,
    /// 80th percentile of run-times, ns.
    pub p80_ns: u64,
    /// 90th percentile of run-times, ns.
    pub p90_ns: u64,
    /// 99th percentile of run-times, ns.
    pub p99_ns: u64,
    /// 99.9th percentile of run-times, ns (`p999_ns` in files written before it was renamed).
    #[serde(alias = "p999_ns")]
    pub p99_9_ns: u64,
    /// 99.99th percentile of run-times, ns (`p9999_ns` in older files).
    #[serde(alias = "p9999_ns")]
    pub p99_99_ns: u64,
    /// Longest run-time, ns.
    pub max_ns: u64,
    /// Median absolute deviation of run-times from their median, ns.
    pub mad_ns: u64,
    /// Fraction of detours shorter than 1 µs.
    pub under_1us: f64,
    /// Fraction of detours shorter than 5 µs.
    pub under_5us: f64,
    /// Fraction of detours shorter than 14 µs.
    pub under_14us: f64,
    /// Why the rate and the noise share are not measured (`None`: they are): a stream that
    /// observed no time, or whose window is only the span of its one detour. Then
    /// `detours_per_s` and `noise_ratio` are NaN (`null` in JSON) and tables show `-`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmeasured: Option<String>,
}

/// Statistics of a whole trace: one entry per stream and the summary over all of them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TraceStats {
    /// All streams together.
    pub overall: Stats,
    /// One entry per stream, in stream order.
    pub streams: Vec<Stats>,
}

impl Stats {
    /// Statistics of one stream.
    pub fn of_stream(stream: &Stream) -> Stats {
        let mut s = Stats::of_streams(std::slice::from_ref(stream));
        s.cpu = Some(stream.cpu);
        s
    }

    /// Statistics of several streams pooled (durations add up; rates are per CPU).
    pub fn of_streams(streams: &[Stream]) -> Stats {
        let runs = streams
            .iter()
            .flat_map(|s| s.records.iter().map(|r| r.run_ns));
        let duration_ns: u64 = streams.iter().map(Stream::duration_ns).sum();
        Stats::from_runs(runs, duration_ns)
    }

    /// Statistics of run-times observed over `duration_ns`.
    pub fn from_runs(runs: impl IntoIterator<Item = u64>, duration_ns: u64) -> Stats {
        Stats::from_histogram(&DetourHistogram::of(runs), duration_ns)
    }

    /// These statistics with their rate and noise share marked not measured, for `why`.
    pub(crate) fn unmeasured(self, why: String) -> Stats {
        Stats {
            detours_per_s: f64::NAN,
            noise_ratio: f64::NAN,
            unmeasured: Some(why),
            ..self
        }
    }

    /// Statistics of the run-times in `h`, observed over `duration_ns`.
    pub(crate) fn from_histogram(h: &DetourHistogram, duration_ns: u64) -> Stats {
        let count = h.count;
        let [under_1us, under_5us, under_14us] = h.under_shares();
        let s = Stats {
            cpu: None,
            count,
            duration_ns,
            detours_per_s: if duration_ns == 0 {
                0.0
            } else {
                count as f64 / (duration_ns as f64 / 1e9)
            },
            noise_ns: h.sum_ns,
            noise_ratio: if duration_ns == 0 {
                0.0
            } else {
                h.sum_ns as f64 / duration_ns as f64
            },
            under_1us,
            under_5us,
            under_14us,
            ..Stats::default()
        };
        if count == 0 {
            return s;
        }
        Stats {
            min_ns: h.min_ns,
            max_ns: h.max_ns,
            mean_ns: h.mean_ns(),
            p20_ns: h.quantile(0.20),
            median_ns: h.quantile(0.50),
            p80_ns: h.quantile(0.80),
            p90_ns: h.quantile(0.90),
            p99_ns: h.quantile(0.99),
            p99_9_ns: h.quantile(0.999),
            p99_99_ns: h.quantile(0.9999),
            mad_ns: h.mad(),
            ..s
        }
    }
}

impl TraceStats {
    /// Statistics of every stream of `trace` and of all of them together.
    pub fn of_trace(trace: &Trace) -> TraceStats {
        TraceStats {
            overall: Stats::of_streams(&trace.streams),
            streams: trace.streams.iter().map(Stats::of_stream).collect(),
        }
        .checked(&trace.header)
    }
}

impl TraceStats {
    /// The rule of every rate and share printed: one over no observed time, or over a window
    /// that is only the span of one detour (an input that states no window, `header`'s
    /// [`crate::model::LABEL_WINDOW`]), is not a measurement and is marked so
    /// ([`Stats::unmeasured`]).
    pub fn checked(self, header: &crate::model::Header) -> TraceStats {
        // An inferred window is the span of the whole trace's detours (every stream's).
        let spans_one_detour = inferred(header) && self.overall.count < 2;
        let check = |s: Stats| {
            if s.duration_ns == 0 {
                s.unmeasured("it observed no time".into())
            } else if spans_one_detour {
                s.unmeasured(
                    "the input states no window, and the span of its detours is one detour".into(),
                )
            } else {
                s
            }
        };
        TraceStats {
            overall: check(self.overall),
            streams: self.streams.into_iter().map(check).collect(),
        }
    }

    /// Notes under the table: what is not measured and why, and an inferred window.
    pub fn notes(&self, header: &crate::model::Header) -> Vec<String> {
        let mut notes: Vec<String> = (self.streams.iter().chain([&self.overall]))
            .filter_map(|s| {
                let name = s.cpu.map_or("all".to_string(), |c| format!("cpu{c}"));
                (s.unmeasured.as_ref()).map(|w| format!("{name}: rate and noise not measured: {w}"))
            })
            .collect();
        if self.streams.len() == 1 && notes.len() == 2 {
            notes.pop();
        }
        if inferred(header) && self.overall.unmeasured.is_none() {
            notes.push(
                "the input states no window: it is taken from the first detour's start to the \
                 last one's end, and rates and noise are over that span"
                    .into(),
            );
        }
        notes
    }

    /// A text table: one row per statistic, one column per stream, then `all`.
    pub fn table(&self) -> String {
        let mut cols: Vec<&Stats> = self.streams.iter().collect();
        if self.streams.len() != 1 {
            cols.push(&self.overall);
        }
        let us = |ns: u64| format!("{:.3}", ns as f64 / 1e3);
        let pct = |f: f64| format!("{:.3}", f * 100.0);
        type Row<'a> = (&'a str, Box<dyn Fn(&Stats) -> String + 'a>);
        let rows: Vec<Row> = vec![
            ("detours", Box::new(|s: &Stats| s.count.to_string())),
            (
                "duration(s)",
                Box::new(|s: &Stats| measured(s, format!("{:.3}", s.duration_ns as f64 / 1e9))),
            ),
            (
                "detours/s",
                Box::new(|s: &Stats| measured(s, format!("{:.1}", s.detours_per_s))),
            ),
            (
                "noise(%)",
                Box::new(move |s: &Stats| measured(s, pct(s.noise_ratio))),
            ),
            ("min(us)", Box::new(move |s: &Stats| us(s.min_ns))),
            ("p20(us)", Box::new(move |s: &Stats| us(s.p20_ns))),
            ("median(us)", Box::new(move |s: &Stats| us(s.median_ns))),
            (
                "mean(us)",
                Box::new(|s: &Stats| format!("{:.3}", s.mean_ns / 1e3)),
            ),
            ("p80(us)", Box::new(move |s: &Stats| us(s.p80_ns))),
            ("p90(us)", Box::new(move |s: &Stats| us(s.p90_ns))),
            ("p99(us)", Box::new(move |s: &Stats| us(s.p99_ns))),
            ("p99.9(us)", Box::new(move |s: &Stats| us(s.p99_9_ns))),
            ("p99.99(us)", Box::new(move |s: &Stats| us(s.p99_99_ns))),
            ("max(us)", Box::new(move |s: &Stats| us(s.max_ns))),
            ("mad(us)", Box::new(move |s: &Stats| us(s.mad_ns))),
            ("<1us(%)", Box::new(move |s: &Stats| pct(s.under_1us))),
            ("<5us(%)", Box::new(move |s: &Stats| pct(s.under_5us))),
            ("<14us(%)", Box::new(move |s: &Stats| pct(s.under_14us))),
        ];
        let head = std::iter::once(String::new()).chain(
            cols.iter()
                .map(|s| s.cpu.map_or("all".to_string(), |c| format!("cpu{c}"))),
        );
        let mut table = Table::new(head).left(1);
        for (name, f) in &rows {
            table.row(std::iter::once(name.to_string()).chain(cols.iter().map(|s| f(s))));
        }
        table.render()
    }
}

/// Whether the trace's windows were inferred from its detours (`interop::LABEL_WINDOW`).
fn inferred(header: &crate::model::Header) -> bool {
    header
        .labels
        .get(crate::model::LABEL_WINDOW)
        .map(String::as_str)
        == Some(crate::model::WINDOW_INFERRED)
}

/// `shown`, or `-` where the rate and noise of `s` are not measured.
fn measured(s: &Stats, shown: String) -> String {
    if s.unmeasured.is_some() {
        "-".into()
    } else {
        shown
    }
}

/// How much of the noise an injector with overhead O can reproduce at scale S.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Injectability {
    /// Injector overhead per detour, ns.
    pub overhead_ns: f64,
    /// Scale factor.
    pub scale: f64,
    /// Fraction of detours with S·run > O.
    pub detours: f64,
    /// Fraction of noise time (Σ run) in detours with S·run > O.
    pub noise: f64,
}

/// Fraction of detours and of noise time with `scale`·run > `overhead_ns`, over `streams`.
pub fn injectability(
    streams: &[Stream],
    overhead_ns: f64,
    scale: f64,
) -> Result<Injectability, TraceError> {
    let mut tally = InjectableTally::new(overhead_ns, scale)?;
    for r in streams.iter().flat_map(|s| &s.records) {
        tally.record(r.run_ns);
    }
    Ok(tally.finish())
}

/// The counts behind one [`Injectability`], gathered one run-time at a time.
#[derive(Debug, Clone, Copy)]
pub struct InjectableTally {
    overhead_ns: f64,
    scale: f64,
    n: u64,
    k: u64,
    total: u128,
    kept: u128,
}

impl InjectableTally {
    /// An empty tally at `scale` for an injector of overhead `overhead_ns`.
    pub fn new(overhead_ns: f64, scale: f64) -> Result<InjectableTally, TraceError> {
        check_scale(scale)?;
        check_overhead(overhead_ns)?;
        Ok(InjectableTally {
            overhead_ns,
            scale,
            n: 0,
            k: 0,
            total: 0,
            kept: 0,
        })
    }

    /// Counts one run-time, ns.
    #[inline]
    pub fn record(&mut self, run_ns: u64) {
        self.n += 1;
        self.total += u128::from(run_ns);
        if self.scale * run_ns as f64 > self.overhead_ns {
            self.k += 1;
            self.kept += u128::from(run_ns);
        }
    }

    /// The shares counted.
    pub fn finish(&self) -> Injectability {
        let frac = |a: f64, b: f64| if b == 0.0 { 0.0 } else { a / b };
        Injectability {
            overhead_ns: self.overhead_ns,
            scale: self.scale,
            detours: frac(self.k as f64, self.n as f64),
            noise: frac(self.kept as f64, self.total as f64),
        }
    }
}

fn check_overhead(overhead_ns: f64) -> Result<(), TraceError> {
    if !overhead_ns.is_finite() || overhead_ns < 0.0 {
        return Err(TraceError::Argument(format!(
            "overhead {overhead_ns} ns must be finite and not negative"
        )));
    }
    Ok(())
}

/// The smallest scale at which a requested share of detours becomes injectable.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ScaleChoice {
    /// Requested share of detours.
    pub share: f64,
    /// Any scale strictly above this one covers the share (O / run of the covering detour).
    pub threshold: f64,
    /// The smallest integer scale that covers the share.
    pub integer: u64,
    /// What the integer scale covers.
    pub at_integer: Injectability,
}

/// Picks the smallest scale at which at least `share` of the detours have S·run > O.
///
/// Returns `Ok(None)` when no finite scale reaches the share (too many zero run-times) or there are
/// no detours.
pub fn scale_for_share(
    streams: &[Stream],
    overhead_ns: f64,
    share: f64,
) -> Result<Option<ScaleChoice>, TraceError> {
    check_share(share)?;
    check_overhead(overhead_ns)?;
    let mut runs: Vec<u64> = streams
        .iter()
        .flat_map(|s| s.records.iter().map(|r| r.run_ns))
        .collect();
    if runs.is_empty() {
        return Ok(None);
    }
    // The k longest detours must be injectable: k = ceil(share · n).
    let n = runs.len();
    let k = ((share * n as f64).ceil() as usize).clamp(1, n);
    let (_, kth, _) = runs.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
    let Some(integer) = integer_scale(*kth, overhead_ns) else {
        return Ok(None);
    };
    let at_integer = injectability(streams, overhead_ns, integer as f64)?;
    Ok(Some(ScaleChoice {
        share,
        threshold: overhead_ns / *kth as f64,
        integer,
        at_integer,
    }))
}

fn check_share(share: f64) -> Result<(), TraceError> {
    if !(share > 0.0 && share <= 1.0) {
        return Err(TraceError::Argument(format!(
            "share {share} must be in (0, 1]"
        )));
    }
    Ok(())
}

/// The rank k = ceil(share · n) (at least 1) of the detour that must be injectable for
/// `share` of `n` detours to be: the k longest are.
pub fn share_rank(share: f64, n: u64) -> Result<u64, TraceError> {
    check_share(share)?;
    Ok(((share * n as f64).ceil() as u64).clamp(1, n.max(1)))
}

/// The smallest integer scale S with S·`run` > `overhead_ns`; `None` for a zero run-time.
fn integer_scale(run: u64, overhead_ns: f64) -> Option<u64> {
    (run != 0).then(|| {
        let threshold = overhead_ns / run as f64;
        (threshold.floor() as u64).saturating_add(1).max(1)
    })
}

/// [`scale_for_share`] from the k-th longest run-time (`share_rank`) of a trace of `n`
/// detours, with `inject_at` counting the injectable shares at the integer scale it picks
/// (another pass over the trace).
pub fn scale_for_kth(
    share: f64,
    overhead_ns: f64,
    kth_run_ns: Option<u64>,
    inject_at: impl FnOnce(f64) -> Result<Injectability, TraceError>,
) -> Result<Option<ScaleChoice>, TraceError> {
    check_share(share)?;
    check_overhead(overhead_ns)?;
    let Some(run) = kth_run_ns else {
        return Ok(None);
    };
    let Some(integer) = integer_scale(run, overhead_ns) else {
        return Ok(None);
    };
    Ok(Some(ScaleChoice {
        share,
        threshold: overhead_ns / run as f64,
        integer,
        at_integer: inject_at(integer as f64)?,
    }))
}

/// Refuses an input `name` of no detours for a figure that needs some: `{name} has no detours:
/// {nothing}` (a number computed from nothing would be printed as if it meant something).
pub fn require_detours(name: &str, detours: u64, nothing: &str) -> Result<(), TraceError> {
    if detours > 0 {
        return Ok(());
    }
    Err(TraceError::Argument(format!(
        "{name} has no detours: {nothing}"
    )))
}

/// `x` as a user wrote it, short: `1e300`, not its 301 digits.
pub fn number_shown(x: f64) -> String {
    let plain = x.to_string();
    if plain.len() > 12 {
        format!("{x:e}")
    } else {
        plain
    }
}

/// Largest scale factor S a replay accepts (the emulator's plan refuses more): the bound of
/// every S a user asks a figure at.
pub const MAX_SCALE: f64 = 1000.0;

/// Checks a scale factor S a user asks a replay figure at: finite, in (0, [`MAX_SCALE`]].
pub fn check_replay_scale(scale: f64) -> Result<(), TraceError> {
    if scale.is_finite() && scale > 0.0 && scale <= MAX_SCALE {
        Ok(())
    } else {
        Err(TraceError::Argument(format!(
            "scale {} must be a finite number in (0, {MAX_SCALE}], the scales a replay accepts",
            number_shown(scale)
        )))
    }
}

/// Checks that a scale factor is finite and positive.
pub fn check_scale(scale: f64) -> Result<(), TraceError> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(TraceError::Argument(format!(
            "scale {} must be finite and greater than 0",
            number_shown(scale)
        )))
    }
}

/// Statistics of a trace gathered in one pass over its chunks: a histogram per stream and,
/// with an overhead, the injectable shares at each scale (none by default).
#[derive(Debug, Default)]
pub struct StatsSink {
    streams: Vec<DetourHistogram>,
    inject: Vec<InjectableTally>,
}

impl StatsSink {
    /// A sink that also counts what an injector of overhead O can reproduce at each of
    /// `tallies`' scales (none: statistics only).
    pub fn new(tallies: Vec<InjectableTally>) -> StatsSink {
        StatsSink {
            streams: Vec::new(),
            inject: tallies,
        }
    }

    /// The statistics of the trace whose frame `scan` holds (its streams' windows).
    pub fn stats(&self, scan: &Scan) -> TraceStats {
        let empty = DetourHistogram::new();
        let mut all = DetourHistogram::new();
        let streams = (scan.frame.streams.iter().enumerate())
            .map(|(i, s)| {
                let h = self.streams.get(i).unwrap_or(&empty);
                all.merge(h);
                let mut st = Stats::from_histogram(h, s.duration_ns());
                st.cpu = Some(s.cpu);
                st
            })
            .collect();
        let duration_ns: u64 = scan.frame.streams.iter().map(Stream::duration_ns).sum();
        TraceStats {
            overall: Stats::from_histogram(&all, duration_ns),
            streams,
        }
        .checked(&scan.frame.header)
    }

    /// The injectable shares counted, one per scale.
    pub fn injectability(&self) -> Vec<Injectability> {
        self.inject.iter().map(InjectableTally::finish).collect()
    }
}

impl StatsSink {
    /// Counts the detours of one chunk of stream `stream`.
    pub(crate) fn record(&mut self, stream: usize, detours: &[Detour]) {
        if self.streams.len() <= stream {
            self.streams.resize_with(stream + 1, DetourHistogram::new);
        }
        let h = &mut self.streams[stream];
        for d in detours {
            h.record(d.run_ns);
        }
        for t in &mut self.inject {
            for d in detours {
                t.record(d.run_ns);
            }
        }
    }
}

impl ChunkSink for StatsSink {
    fn take(&mut self, stream: usize, detours: Vec<Detour>) {
        self.record(stream, &detours);
    }
}

/// One pass of [`kth_longest`]: counts the run-times that agree with the bits found so far,
/// by their next 16 bits.
struct DigitCount {
    /// Bits above `shift + 16` that a counted run-time must have (those found so far).
    prefix: u64,
    shift: u32,
    bins: Box<[u64; 1 << 16]>,
}

impl ChunkSink for DigitCount {
    fn take(&mut self, _stream: usize, detours: Vec<Detour>) {
        let high = self.shift + 16;
        for d in &detours {
            if d.run_ns.checked_shr(high).unwrap_or(0) == self.prefix.checked_shr(high).unwrap_or(0)
            {
                self.bins[((d.run_ns >> self.shift) & 0xffff) as usize] += 1;
            }
        }
    }
}

/// The `k`-th longest run-time (1 = the longest) of a trace whose longest is `max_ns`, exactly,
/// in at most four passes over it: each pass `scan` makes feeds a sink and finds 16 more bits
/// (one pass per 16 bits of `max_ns`). `None` when the trace has fewer than `k` detours.
pub fn kth_longest(
    k: u64,
    max_ns: u64,
    mut scan: impl FnMut(&mut dyn ChunkSink) -> Result<(), TraceError>,
) -> Result<Option<u64>, TraceError> {
    if k == 0 {
        return Ok(None);
    }
    let bits = 64 - max_ns.leading_zeros();
    let mut shift = bits.div_ceil(16).max(1) * 16 - 16;
    let mut prefix = 0u64;
    let mut rank = k;
    loop {
        let mut pass = DigitCount {
            prefix,
            shift,
            bins: Box::new([0; 1 << 16]),
        };
        scan(&mut pass)?;
        let mut found = None;
        for digit in (0..1u64 << 16).rev() {
            let n = pass.bins[digit as usize];
            if rank <= n {
                found = Some(digit);
                break;
            }
            rank -= n;
        }
        let Some(digit) = found else {
            return Ok(None);
        };
        prefix |= digit << shift;
        if shift == 0 {
            return Ok(Some(prefix));
        }
        shift -= 16;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Detour;

    fn stream(runs: &[u64], gap: u64) -> Stream {
        let mut t = 0;
        let mut ds = Vec::new();
        for &r in runs {
            t += gap;
            ds.push(Detour {
                start_ns: t,
                run_ns: r,
            });
            t += r;
        }
        Stream::from_detours(0, 0, t + gap, &ds).unwrap()
    }

    #[test]
    fn quantiles_and_mad_of_a_known_sample() {
        // runs 1..=100 us: median 50 us (within 0.1 %), MAD 25 us, 4 % under 5 us.
        let runs: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let s = Stats::of_stream(&stream(&runs, 10_000));
        assert_eq!(s.count, 100);
        assert_eq!(s.min_ns, 1000);
        assert_eq!(s.max_ns, 100_000);
        assert!(
            (s.median_ns as f64 - 50_000.0).abs() <= 50.0,
            "{}",
            s.median_ns
        );
        assert!(
            (s.mad_ns as f64 - 25_000.0).abs() <= 1_000.0,
            "{}",
            s.mad_ns
        );
        assert_eq!(s.mean_ns, 50_500.0);
        assert_eq!(s.under_1us, 0.0);
        assert_eq!(s.under_5us, 0.04);
        assert_eq!(s.under_14us, 0.13);
        let total: u64 = runs.iter().sum();
        assert_eq!(s.noise_ns, total);
        assert_eq!(s.noise_ratio, total as f64 / s.duration_ns as f64);
    }

    #[test]
    fn statistics_written_with_the_old_quantile_names_still_read() {
        let s = Stats::of_stream(&stream(&[1000, 2000, 3000], 10_000));
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            json.contains("\"p99_9_ns\"") && json.contains("\"p99_99_ns\""),
            "{json}"
        );
        let old = json
            .replace("\"p99_9_ns\"", "\"p999_ns\"")
            .replace("\"p99_99_ns\"", "\"p9999_ns\"");
        assert_eq!(serde_json::from_str::<Stats>(&old).unwrap(), s);
    }

    #[test]
    fn empty_stream_has_zero_stats() {
        let s = Stats::of_stream(&Stream {
            end_ns: 1_000_000_000,
            ..Stream::default()
        });
        assert_eq!(s.count, 0);
        assert_eq!(s.detours_per_s, 0.0);
        assert_eq!(s.max_ns, 0);
    }

    #[test]
    fn injectability_counts_strictly_greater() {
        let s = stream(&[1000, 2000, 3000, 4000], 10_000);
        let i = injectability(std::slice::from_ref(&s), 3000.0, 1.0).unwrap();
        assert_eq!(i.detours, 0.25);
        assert_eq!(i.noise, 0.4);
        let i = injectability(std::slice::from_ref(&s), 3000.0, 3.0).unwrap();
        assert_eq!(i.detours, 0.75);
        assert!(injectability(&[s], 1.0, 0.0).is_err());
    }

    #[test]
    fn scale_for_share_picks_the_covering_detour() {
        let s = stream(&[1000, 2000, 3000, 4000], 10_000);
        // 75 % needs the 3 longest: run 2000, O = 5000 → S > 2.5, integer 3.
        let c = scale_for_share(std::slice::from_ref(&s), 5000.0, 0.75)
            .unwrap()
            .unwrap();
        assert_eq!(c.threshold, 2.5);
        assert_eq!(c.integer, 3);
        assert_eq!(c.at_integer.detours, 0.75);
        // exactly on an integer: O = 4000 with run 2000 → S must exceed 2, so 3.
        let c = scale_for_share(&[s], 4000.0, 0.75).unwrap().unwrap();
        assert_eq!(c.integer, 3);
    }
}
