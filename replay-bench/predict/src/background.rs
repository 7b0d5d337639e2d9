//! The replay machine's own noise as a second noise source (`predict --platform-noise`). A real
//! run measures the trace replayed on top of the platform's noise against the platform's noise
//! alone; so does the prediction with a background: each stream's plan is *realised* once over
//! its timeline (the plan's own injections, with scale, merging, overhead and drops applied),
//! united with a stream of the platform's detours tiled over the same timeline, and the union
//! is replayed as recorded. The baseline replays the platform's stream alone on the same
//! timeline, so a rank meets the same platform noise in both and the two runs are paired.
//! Every platform stream is replayed (tiled), so its detours are kept (16 bytes each,
//! [`read_platform`]: one pass, no records), never the platform trace itself.

use std::sync::Arc;

use anyhow::Context as _;
use jitter_emulator::{Plan, PlanOptions, PlanStats};
use std::path::Path;

use jitter_trace::facts::{Facts, FactsSink};
use jitter_trace::model::unite;
use jitter_trace::scan::{scan_trace, ChunkSink};
use jitter_trace::{Detour, Record, Stream, Trace, TraceError};

use super::input::TraceInput;

/// Most platform detours one tiled stream may hold (each costs a record in two plans).
pub(crate) const MAX_TILED_DETOURS: u64 = 20_000_000;

/// A platform-noise trace: every stream a platform CPU's detours over the trace's window.
#[derive(Debug, Clone)]
pub(crate) struct Background {
    /// File name, for messages and the report.
    pub label: String,
    /// Detours of each stream, relative to the common window's start.
    streams: Vec<Vec<Detour>>,
    /// Length of the common window, ns.
    window_ns: u64,
}

/// A platform-noise trace as read ([`read_platform`]): its frame, every stream's detours as
/// their chunks came, and the whole trace's facts (integrity, warnings), all from one pass.
#[derive(Debug)]
pub(crate) struct PlatformRead {
    frame: Trace,
    runs: Vec<Vec<Vec<Detour>>>,
    /// The whole trace's integrity and warnings ([`jitter_trace::Loaded::warnings`]).
    pub facts: Facts,
}

/// Keeps every chunk's detours, and the facts of all.
#[derive(Default)]
struct Runs {
    runs: Vec<Vec<Vec<Detour>>>,
    facts: FactsSink,
}

impl ChunkSink for Runs {
    fn take(&mut self, stream: usize, detours: Vec<Detour>) {
        self.facts.record(stream, &detours);
        if self.runs.len() <= stream {
            self.runs.resize_with(stream + 1, Vec::new);
        }
        self.runs[stream].push(detours);
    }
}

/// Reads the platform-noise trace at `path` in one pass, keeping its detours (16 bytes each:
/// the whole trace is replayed, tiled) but no records.
pub(crate) fn read_platform(path: &Path) -> Result<PlatformRead, TraceError> {
    let mut sink = Runs::default();
    let scan = scan_trace(path, &mut sink)?;
    let facts = sink.facts.facts(&scan);
    Ok(PlatformRead {
        frame: scan.frame,
        runs: sink.runs,
        facts,
    })
}

impl Background {
    /// Takes the platform's streams from `trace` (read from `label`); a stream without any
    /// detour, or a trace without streams, is refused.
    #[cfg(test)]
    pub(crate) fn new(trace: &Trace, label: &str) -> anyhow::Result<Self> {
        Self::build(trace, label, |_, s| {
            Ok(s.records.iter().map(Record::detour).collect())
        })
    }

    /// `Background::new` of the trace [`read_platform`] read, its chunks checked as a
    /// stream of a loaded trace (in order, inside its window) one stream at a time.
    pub(crate) fn of_read(read: PlatformRead, label: &str) -> anyhow::Result<Self> {
        let PlatformRead {
            frame, mut runs, ..
        } = read;
        Self::build(&frame, label, |i, s| {
            let runs = runs.get_mut(i).map(std::mem::take).unwrap_or_default();
            let slices: Vec<&[Detour]> = runs.iter().map(Vec::as_slice).collect();
            let checked = Stream::from_detour_runs(s.cpu, s.begin_ns, s.end_ns, &slices)?;
            drop(slices);
            drop(runs);
            Ok(checked.records.iter().map(Record::detour).collect())
        })
    }

    /// The background of the streams of `frame`, stream `i`'s detours from `detours(i, s)`.
    fn build(
        frame: &Trace,
        label: &str,
        mut detours: impl FnMut(usize, &Stream) -> anyhow::Result<Vec<Detour>>,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            !frame.streams.is_empty(),
            "platform-noise trace {label} has no stream"
        );
        let (begin, end) = jitter_emulator::plan::common_window(frame);
        anyhow::ensure!(
            end > begin,
            "platform-noise trace {label} has an empty window"
        );
        let streams = (frame.streams.iter().enumerate())
            .map(|(i, s)| {
                let mut ds = detours(i, s)?;
                anyhow::ensure!(
                    !ds.is_empty(),
                    "platform-noise trace {label}: stream {i} (CPU {}) holds no detour; \
                     collect it longer",
                    s.cpu
                );
                for d in &mut ds {
                    d.start_ns -= begin;
                }
                Ok(ds)
            })
            .collect::<anyhow::Result<Vec<Vec<Detour>>>>()?;
        Ok(Background {
            label: label.to_string(),
            streams,
            window_ns: end - begin,
        })
    }

    /// Streams (platform CPUs) held.
    pub fn streams(&self) -> usize {
        self.streams.len()
    }

    /// Refuses a timeline that would repeat the platform's streams into more than
    /// [`MAX_TILED_DETOURS`] detours each.
    pub(crate) fn check_tiling(&self, period_ns: u64) -> anyhow::Result<()> {
        let laps = period_ns.div_ceil(self.window_ns);
        let most = self.streams.iter().map(Vec::len).max().unwrap_or(0) as u64;
        let n = most.saturating_mul(laps);
        anyhow::ensure!(
            n <= MAX_TILED_DETOURS,
            "platform noise {}: repeating its {:.1} s over the trace's {:.1} s makes {n} detours \
             per stream, over the limit of {MAX_TILED_DETOURS}; predict a shorter slice of the \
             trace (`jitter-trace slice`)",
            self.label,
            self.window_ns as f64 / 1e9,
            period_ns as f64 / 1e9
        );
        Ok(())
    }

    /// Stream `s` repeated end to end over `[0, period_ns)`, the last detour cut at the end.
    pub(crate) fn tiled(&self, s: usize, period_ns: u64) -> Vec<Detour> {
        let one = &self.streams[s % self.streams.len()];
        let mut out = Vec::new();
        let mut lap = 0u64;
        'laps: loop {
            let base = lap * self.window_ns;
            for d in one {
                let start = base + d.start_ns;
                if start >= period_ns {
                    break 'laps;
                }
                out.push(Detour {
                    start_ns: start,
                    run_ns: d.run_ns.min(period_ns - start),
                });
            }
            lap += 1;
        }
        out
    }
}

/// The injections one lap of `plan` realises, as detours on its timeline `[0, D)` (a replay
/// started at point 0: due time = timeline point at S = 1), the last cut at D; and the plan's
/// counts over that lap. Needs S = 1 and f = 1 ([`check_setup`]).
pub(crate) fn realised(plan: &Arc<Plan>) -> (Vec<Detour>, PlanStats) {
    let period = plan.period_ns();
    let mut cursor = plan.cursor(0);
    let mut out = Vec::new();
    for inj in cursor.by_ref() {
        if inj.due_ns >= period {
            break;
        }
        out.push(Detour {
            start_ns: inj.due_ns,
            run_ns: inj.span_ns.min(period - inj.due_ns),
        });
    }
    (out, cursor.stats())
}

/// Refuses the settings a background cannot be realised under: a scale or a fraction (a lap
/// realised once would not match every rank's) and timer errors (`timer_errors`: drawn per
/// injection, they would also move the platform's own detours).
pub fn check_setup(options: &PlanOptions, timer_errors: bool) -> anyhow::Result<()> {
    anyhow::ensure!(
        options.scale == 1.0 && options.fraction >= 1.0,
        "--platform-noise needs --scale 1 and --fraction 1 (got S = {}, f = {})",
        options.scale,
        options.fraction
    );
    anyhow::ensure!(
        !timer_errors,
        "--platform-noise needs --timer abstime (the itimer's errors, drawn per injection, \
         would also move the platform's own detours)"
    );
    Ok(())
}

/// The plans of one lap each, for one input (see [`TraceInput::with_background`]).
#[derive(Debug, Clone)]
pub(crate) struct Realised {
    /// Trace ∪ platform, for every (platform stream, plan) pair, platform stream major.
    pub united: Vec<Arc<Plan>>,
    /// The platform's stream alone, in the same order.
    pub platform: Vec<Arc<Plan>>,
    /// The trace plans' counts over one lap each (summed).
    pub lap: PlanStats,
}

/// Realises `plans` over `bg`: for each platform stream p (major) and plan j, the union of plan
/// j's lap and stream p tiled over its timeline, and stream p alone. The layout keeps every
/// node's trace: a node set's n node traces become n·k_p, and node g still replays trace g mod n.
pub(crate) fn realise(plans: &[Arc<Plan>], bg: &Background) -> anyhow::Result<Realised> {
    let exact = PlanOptions::ideal();
    let plan_of = |cpu: usize, period: u64, detours: &[Detour]| -> anyhow::Result<Arc<Plan>> {
        let stream = Stream::from_detours(cpu as u32, 0, period, detours)
            .context("cannot lay out the united noise")?;
        Plan::new(&stream, exact).map_err(|e| anyhow::anyhow!("platform noise {}: {e}", bg.label))
    };
    for plan in plans {
        bg.check_tiling(plan.period_ns())?;
    }
    let laps: Vec<(Vec<Detour>, PlanStats)> = plans.iter().map(realised).collect();
    let mut out = Realised {
        united: Vec::with_capacity(plans.len() * bg.streams()),
        platform: Vec::with_capacity(plans.len() * bg.streams()),
        lap: PlanStats::default(),
    };
    for (_, stats) in &laps {
        out.lap += *stats;
    }
    for p in 0..bg.streams() {
        for (plan, (lap, _)) in plans.iter().zip(&laps) {
            let period = plan.period_ns();
            let platform = bg.tiled(p, period);
            let mut both: Vec<Detour> = Vec::with_capacity(lap.len() + platform.len());
            both.extend_from_slice(lap);
            both.extend_from_slice(&platform);
            both.sort_unstable_by_key(|d| d.start_ns);
            out.united.push(plan_of(p, period, &unite(both))?);
            out.platform.push(plan_of(p, period, &platform)?);
        }
    }
    Ok(out)
}

impl TraceInput {
    /// This input replayed on top of the platform noise `bg`: its plans become the united
    /// realisations and its baseline the platform's streams alone ([`realise`]).
    pub(crate) fn with_background(mut self, bg: &Background) -> anyhow::Result<Self> {
        let r = realise(&self.plans, bg)?;
        self.plans = r.united;
        self.background = Some(super::input::BackgroundPlans {
            label: bg.label.clone(),
            plans: r.platform,
            lap: r.lap,
        });
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_trace::synth::{synthesize, Spec};

    fn periodic(spec: &str, seconds: u64, seed: u64) -> Trace {
        let s: Spec = spec.parse().unwrap();
        synthesize(&s, 1, seconds * 1_000_000_000, seed).unwrap()
    }

    #[test]
    fn a_lap_realises_the_plan_s_injections_on_its_timeline() {
        let t = periodic("periodic:period=4ms,dur=120us", 1, 1);
        let plan = Plan::from_trace(&t, 0, PlanOptions::ideal()).unwrap();
        let (lap, stats) = realised(&plan);
        // Every detour as recorded: 250 of them, 120 µs each, at the stream's own times.
        assert_eq!(lap.len(), 250);
        assert!(lap.iter().all(|d| d.run_ns == 120_000));
        assert_eq!(lap[1].start_ns - lap[0].start_ns, 4_000_000);
        assert_eq!(stats.dropped, 0);
        // With an overhead the plan's injections keep their span (O is paid inside it); those
        // shorter than O are dropped, as the real injector drops them.
        let mixed = periodic(
            "periodic:period=4ms,dur=120us+periodic:period=10ms,dur=2us,phase=1ms",
            1,
            1,
        );
        let opts = PlanOptions {
            overhead_ns: 5_000,
            ..PlanOptions::ideal()
        };
        let plan = Plan::from_trace(&mixed, 0, opts).unwrap();
        let (lap, stats) = realised(&plan);
        assert_eq!(lap.len(), 250);
        assert_eq!(stats.dropped, 100);
        assert!(lap.iter().all(|d| d.run_ns == 120_000));
    }

    #[test]
    fn the_platform_is_tiled_and_united_with_the_trace() {
        let t = periodic("periodic:period=4ms,dur=120us", 1, 1);
        let plan = Plan::from_trace(&t, 0, PlanOptions::ideal()).unwrap();
        // A platform of 250 ms with one 50 µs detour every 10 ms, two CPUs.
        let s: Spec = "periodic:period=10ms,dur=50us".parse().unwrap();
        let platform = synthesize(&s, 2, 250_000_000, 7).unwrap();
        let bg = Background::new(&platform, "p.jtr").unwrap();
        let tiled = bg.tiled(0, plan.period_ns());
        // 1 s of timeline holds four laps of 25 detours.
        assert_eq!(tiled.len(), 100);
        assert_eq!(tiled[25].start_ns - tiled[0].start_ns, 250_000_000);
        let r = realise(std::slice::from_ref(&plan), &bg).unwrap();
        assert_eq!((r.united.len(), r.platform.len()), (2, 2));
        for (u, p) in r.united.iter().zip(&r.platform) {
            assert_eq!(u.period_ns(), plan.period_ns());
            assert_eq!(p.period_ns(), plan.period_ns());
            let noise = |plan: &Arc<Plan>| plan.records().iter().map(|r| r.run_ns).sum::<u64>();
            // The union loses no time and counts an overlap once.
            let sum = 250 * 120_000 + noise(p);
            assert!(noise(u) <= sum && noise(u) >= sum - 100 * 50_000);
            assert!(noise(u) >= 250 * 120_000);
        }
    }

    #[test]
    fn settings_a_lap_cannot_stand_for_are_refused() {
        let scaled = PlanOptions {
            scale: 2.0,
            ..PlanOptions::ideal()
        };
        assert!(check_setup(&scaled, false)
            .unwrap_err()
            .to_string()
            .contains("--scale 1"));
        let e = check_setup(&PlanOptions::ideal(), true).unwrap_err();
        assert!(e.to_string().contains("--timer abstime"), "{e}");
        assert!(check_setup(&PlanOptions::ideal(), false).is_ok());
        let empty = Trace {
            streams: Vec::new(),
            ..periodic("periodic:period=4ms,dur=1us", 1, 1)
        };
        assert!(Background::new(&empty, "e.jtr").is_err());
        // 1000 detours in 10 ms, repeated over 1000 s: 10^8 per stream, refused before tiling.
        let s: Spec = "periodic:period=10us,dur=1us".parse().unwrap();
        let dense = synthesize(&s, 1, 10_000_000, 1).unwrap();
        let bg = Background::new(&dense, "d.jtr").unwrap();
        let e = bg.check_tiling(1_000_000_000_000).unwrap_err().to_string();
        assert!(
            e.contains("over the limit") && e.contains("jitter-trace slice"),
            "{e}"
        );
        assert!(bg.check_tiling(10_000_000).is_ok());
    }

    #[test]
    fn a_platform_read_in_one_pass_is_the_platform_loaded_whole() {
        let s: Spec = "periodic:period=10ms,dur=50us+poisson:rate=3000/s,dur=exp:2us"
            .parse()
            .unwrap();
        let platform = synthesize(&s, 3, 250_000_000, 7).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jtr");
        jitter_trace::write_trace(&path, &platform).unwrap();
        let whole = Background::new(&jitter_trace::read_trace(&path).unwrap().trace, "p").unwrap();
        let read = read_platform(&path).unwrap();
        assert!(read.facts.integrity().is_whole());
        let one = Background::of_read(read, "p").unwrap();
        assert_eq!(one.streams, whole.streams);
        assert_eq!(one.window_ns, whole.window_ns);
        assert_eq!(one.streams[1].len(), platform.streams[1].records.len());
        // A stream with no detour is refused by both, word for word.
        let mut quiet = platform.clone();
        quiet.streams[2] = Stream::from_detours(2, 0, 250_000_000, &[]).unwrap();
        jitter_trace::write_trace(&path, &quiet).unwrap();
        let e = Background::of_read(read_platform(&path).unwrap(), "p").unwrap_err();
        let f = Background::new(&quiet, "p").unwrap_err();
        assert_eq!(e.to_string(), f.to_string());
    }
}
