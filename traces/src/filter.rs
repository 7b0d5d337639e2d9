//! Traces filtered by source: keep or drop the detour time of named sources or categories of
//! an attributed trace (`jitter-trace filter`, and the what-if predictions of `replay-bench`).
//!
//! Times are net, as the kernel's own accounting has them: dropping `timer` from a detour of
//! `timer+sched+task:x` shortens it by the timer's net share (its time with nested sources
//! subtracted), the detour keeping its start. A detour left with nothing is gone, its time
//! joining the sleeps around it; one left shorter than the trace's detour threshold is gone
//! too, since the probe would not have seen it (both counted). The filtered trace's header says
//! what was removed (labels [`LABEL_FILTER`], [`LABEL_REMOVED_NS`]), and its attribution keeps
//! the sources left in each detour, so that it can be filtered, tabled or exported again.
//!
//! With wake-ups ([`SourceFilter::with_wakeups`], drop only), a detour in which a selected task
//! or work item ran loses, beside that source's time, its wake-up path: the `periodic` and
//! `scheduling` parts (the timer that woke the task, the switches to it and back, the softirqs
//! run on the way) and the time no event explains (on a VM, the hypervisor's exits for it).
//! Stopping the task removes those too; the net rule keeps them. Other tasks, work items and
//! interrupts that shared the detour stay, and a tick that happened to fall inside it goes
//! with it (a bias of its net time times the task's share of the CPU, stated by the count).
//!
//! A selector is a source label (`timer`, `task:jitter-collect`, `unattributed`), a kind
//! (`task` matches every `task:…`, `softirq` every `softirq:…`) or `category:NAME` with a
//! category of [`Category`] (`periodic`, `page_fault`, `scheduling`, `preemption`, `io`, `ipi`,
//! `unattributed`).

use std::str::FromStr;

use crate::attribution::{
    AttributedDetour, Attribution, Category, CpuAttribution, Part, UNATTRIBUTED,
};
use crate::error::TraceError;
use crate::model::{Detour, Stream, Trace};

/// Header label naming the filter applied (e.g. `drop timer,category:io`).
pub(crate) const LABEL_FILTER: &str = "filter";
/// Header label with the detour time the filter removed, ns over all streams.
pub(crate) const LABEL_REMOVED_NS: &str = "filter_removed_ns";

/// One name a filter matches sources by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// A source label, or a kind when it has no `:` (`task` matches `task:x`).
    Source(String),
    /// Every source of a category.
    Category(Category),
}

impl FromStr for Selector {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, TraceError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(TraceError::Argument("an empty source name".into()));
        }
        match s.strip_prefix("category:") {
            Some(c) => category_named(c).map(Selector::Category),
            None => Ok(Selector::Source(s.to_string())),
        }
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::Source(s) => f.write_str(s),
            Selector::Category(c) => write!(f, "category:{}", category_key(*c)),
        }
    }
}

/// The categories by the names a selector gives them.
const CATEGORIES: [(&str, Category); 7] = [
    ("periodic", Category::Periodic),
    ("page_fault", Category::PageFault),
    ("scheduling", Category::Scheduling),
    ("preemption", Category::Preemption),
    ("io", Category::Io),
    ("ipi", Category::Ipi),
    ("unattributed", Category::Unattributed),
];

fn category_named(name: &str) -> Result<Category, TraceError> {
    let key = name.to_ascii_lowercase().replace([' ', '/'], "_");
    let key = if key == "i_o" { "io".to_string() } else { key };
    (CATEGORIES.iter().find(|(n, _)| *n == key).map(|(_, c)| *c)).ok_or_else(|| {
        let names: Vec<&str> = CATEGORIES.iter().map(|(n, _)| *n).collect();
        TraceError::Argument(format!(
            "unknown category `{name}` (use one of {})",
            names.join(", ")
        ))
    })
}

fn category_key(c: Category) -> &'static str {
    (CATEGORIES.iter().find(|(_, k)| *k == c)).map_or("unattributed", |(n, _)| n)
}

impl Selector {
    /// Whether the source `label` is selected.
    pub fn matches(&self, label: &str) -> bool {
        match self {
            Selector::Category(c) => Category::of(label) == *c,
            Selector::Source(s) if s.contains(':') => label == s,
            Selector::Source(s) => label == s || label.split_once(':').is_some_and(|(k, _)| k == s),
        }
    }
}

/// Which detour time a filter keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFilter {
    /// The sources named.
    pub selectors: Vec<Selector>,
    /// `true`: keep only the named sources' time; `false`: drop it.
    pub keep: bool,
    /// Drop a selected task's wake-up path with it (see the module doc; drop only).
    pub wakeups: bool,
}

impl SourceFilter {
    /// Drops the named sources.
    pub fn drop(selectors: Vec<Selector>) -> Self {
        SourceFilter {
            selectors,
            keep: false,
            wakeups: false,
        }
    }

    /// Keeps only the named sources.
    pub fn keep(selectors: Vec<Selector>) -> Self {
        SourceFilter {
            selectors,
            keep: true,
            wakeups: false,
        }
    }

    /// The same filter taking each dropped task's wake-up path with it.
    pub fn with_wakeups(self) -> Self {
        SourceFilter {
            wakeups: true,
            ..self
        }
    }

    /// Whether a detour with these parts is the wake-up of a dropped task or work item.
    fn woke_dropped_task(&self, parts: &[Part]) -> bool {
        self.wakeups
            && !self.keep
            && parts.iter().any(|p| {
                matches!(p.source.split_once(':'), Some(("task" | "work", _)))
                    && !self.keeps(&p.source)
            })
    }

    /// Whether the time of source `label` stays.
    pub(crate) fn keeps(&self, label: &str) -> bool {
        self.selectors.iter().any(|s| s.matches(label)) == self.keep
    }

    /// The filter as the header's label says it, e.g. `drop timer,category:io`.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self.selectors.iter().map(|s| s.to_string()).collect();
        let verb = if self.keep { "keep" } else { "drop" };
        let wakeups = if self.wakeups && !self.keep {
            " with wake-ups"
        } else {
            ""
        };
        format!("{verb} {}{wakeups}", names.join(","))
    }
}

/// A filtered trace, its attribution, and what the filter took away.
#[derive(Debug, Clone)]
pub struct Filtered {
    /// The trace with the filtered detours.
    pub trace: Trace,
    /// Its attribution (the sources left in each detour).
    pub attribution: Attribution,
    /// Detour time removed, ns over all streams (including the detours below the threshold).
    pub removed_ns: u64,
    /// Detours that lost all their time.
    pub emptied: u64,
    /// Detours left shorter than the trace's threshold, dropped.
    pub below_threshold: u64,
    /// Detours that lost part of their time and stay.
    pub shortened: u64,
    /// Detours whose wake-up path went with a dropped task (0 without wake-ups).
    pub wakeups: u64,
}

/// Filters `trace` by the sources of its attribution `a` (which must be the trace's: one CPU
/// entry per stream, one detour per record, same starts and run-times).
pub fn filter(trace: &Trace, a: &Attribution, f: &SourceFilter) -> Result<Filtered, TraceError> {
    if f.selectors.is_empty() {
        return Err(TraceError::Argument(
            "name at least one source to filter".into(),
        ));
    }
    let threshold = threshold_of(&trace.header);
    let mut out = Filtered {
        trace: without_streams(trace),
        attribution: without_cpus(a),
        removed_ns: 0,
        emptied: 0,
        below_threshold: 0,
        shortened: 0,
        wakeups: 0,
    };
    let mut tally = Tally::default();
    for (i, s) in trace.streams.iter().enumerate() {
        let ca = (a.cpus.iter().find(|c| c.cpu == s.cpu)).ok_or_else(|| no_entry(s.cpu, i))?;
        if ca.detours.len() != s.records.len() {
            return Err(other_count(
                s.cpu,
                ca.detours.len() as u64,
                s.records.len() as u64,
            ));
        }
        let mut detours = Vec::with_capacity(s.records.len());
        let mut kept = Vec::with_capacity(s.records.len());
        for (j, (r, d)) in s.records.iter().zip(&ca.detours).enumerate() {
            same_detour(s.cpu, j, &r.detour(), d)?;
            if let Some(k) = filter_one(f, threshold, d, &mut tally) {
                detours.push(Detour {
                    start_ns: k.start_ns,
                    run_ns: k.run_ns,
                });
                kept.push(k);
            }
        }
        let mut stream = Stream::from_detours(s.cpu, s.begin_ns, s.end_ns, &detours)?;
        stream.counters = s.counters.clone();
        out.trace.streams.push(stream);
        let mut cpu = without_detours(ca);
        cpu.detours = kept;
        out.attribution.cpus.push(cpu);
    }
    out.trace.sync_header();
    label(&mut out.trace.header, f, tally.removed_ns);
    tally.set(&mut out);
    Ok(out)
}

/// The trace's detour threshold, whole ns: a detour left shorter is dropped.
pub(crate) fn threshold_of(h: &crate::model::Header) -> u64 {
    h.threshold_ns.max(0.0).ceil() as u64
}

/// What a filter took away, counted detour by detour (the fields of [`Filtered`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Detour time removed, ns (including the detours below the threshold).
    pub removed_ns: u64,
    /// Detours that lost all their time.
    pub emptied: u64,
    /// Detours left shorter than the trace's threshold, dropped.
    pub below_threshold: u64,
    /// Detours that lost part of their time and stay.
    pub shortened: u64,
    /// Detours whose wake-up path went with a dropped task.
    pub wakeups: u64,
    /// Detours that stay.
    pub kept: u64,
}

impl Tally {
    /// Adds `o`'s counts.
    pub(crate) fn add(&mut self, o: &Tally) {
        self.removed_ns += o.removed_ns;
        self.emptied += o.emptied;
        self.below_threshold += o.below_threshold;
        self.shortened += o.shortened;
        self.wakeups += o.wakeups;
        self.kept += o.kept;
    }

    fn set(&self, out: &mut Filtered) {
        out.removed_ns = self.removed_ns;
        out.emptied = self.emptied;
        out.below_threshold = self.below_threshold;
        out.shortened = self.shortened;
        out.wakeups = self.wakeups;
    }
}

/// The detour `d` filtered by `f` (`None`: gone, emptied or below `threshold`), counted.
pub(crate) fn filter_one(
    f: &SourceFilter,
    threshold: u64,
    d: &AttributedDetour,
    tally: &mut Tally,
) -> Option<AttributedDetour> {
    let woken = f.woke_dropped_task(&d.parts);
    tally.wakeups += u64::from(woken);
    let path = |p: &Part| {
        woken
            && matches!(
                Category::of(&p.source),
                Category::Periodic | Category::Scheduling
            )
    };
    let parts: Vec<Part> = (d.parts.iter())
        .filter(|p| f.keeps(&p.source) && !path(p))
        .cloned()
        .collect();
    let explained: u64 = parts.iter().map(|p| p.ns).sum();
    let rest = if f.keeps(UNATTRIBUTED) && !woken {
        d.unattributed_ns()
    } else {
        0
    };
    let run_ns = (explained + rest).min(d.run_ns);
    tally.removed_ns += d.run_ns - run_ns;
    if run_ns == 0 || run_ns < threshold {
        tally.emptied += u64::from(run_ns == 0);
        tally.below_threshold += u64::from(run_ns > 0);
        tally.removed_ns += run_ns;
        return None;
    }
    tally.shortened += u64::from(run_ns < d.run_ns);
    tally.kept += 1;
    Some(attributed(d.start_ns, run_ns, parts))
}

/// The header's labels say what `f` removed, after what earlier filters did.
pub(crate) fn label(header: &mut crate::model::Header, f: &SourceFilter, removed_ns: u64) {
    let labels = &mut header.labels;
    let before = labels.get(LABEL_FILTER).cloned();
    let described = f.describe();
    labels.insert(
        LABEL_FILTER.into(),
        before.map_or(described.clone(), |b| format!("{b}; {described}")),
    );
    let removed_before: u64 = (labels.get(LABEL_REMOVED_NS))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    labels.insert(
        LABEL_REMOVED_NS.into(),
        (removed_before + removed_ns).to_string(),
    );
}

/// The error of a trace's stream `i` on `cpu` that the attribution has no entry for.
pub(crate) fn no_entry(cpu: u32, i: usize) -> TraceError {
    TraceError::Argument(format!(
        "the attribution has no entry for CPU {cpu} (stream {i})"
    ))
}

/// The error of an attribution whose entry for `cpu` holds `held` detours, the trace `trace`.
pub(crate) fn other_count(cpu: u32, held: u64, trace: u64) -> TraceError {
    TraceError::Argument(format!(
        "the attribution of CPU {cpu} holds {held} detours, the trace {trace}: not this trace's"
    ))
}

/// Detour `j` of `cpu` as the trace has it (`r`) and as the attribution has it (`d`): the
/// same start and run-time, or the error saying the attribution is another trace's.
pub(crate) fn same_detour(
    cpu: u32,
    j: usize,
    r: &Detour,
    d: &AttributedDetour,
) -> Result<(), TraceError> {
    if (r.start_ns, r.run_ns) != (d.start_ns, d.run_ns) {
        return Err(TraceError::Argument(format!(
            "detour {j} of CPU {cpu} starts at {} ns for {} ns in the trace and at {} ns \
             for {} ns in the attribution: not this trace's",
            r.start_ns, r.run_ns, d.start_ns, d.run_ns
        )));
    }
    Ok(())
}

/// The trace without its streams (header, self windows, notes).
fn without_streams(t: &Trace) -> Trace {
    Trace {
        header: t.header.clone(),
        streams: Vec::new(),
        self_windows: t.self_windows.clone(),
        notes: t.notes.clone(),
    }
}

/// The attribution without its CPUs.
pub(crate) fn without_cpus(a: &Attribution) -> Attribution {
    Attribution {
        version: a.version,
        collection_start_unix_ns: a.collection_start_unix_ns,
        trace_clock: a.trace_clock.clone(),
        events: a.events.clone(),
        cpus: Vec::new(),
        notes: a.notes.clone(),
    }
}

/// One CPU's attribution without its detours.
pub(crate) fn without_detours(c: &CpuAttribution) -> CpuAttribution {
    CpuAttribution {
        cpu: c.cpu,
        begin_ns: c.begin_ns,
        end_ns: c.end_ns,
        events: c.events,
        events_lost: c.events_lost,
        entries_checked: c.entries_checked,
        entries_outside: c.entries_outside,
        steal: c.steal,
        detours: Vec::new(),
    }
}

/// A detour of `run_ns` with the sources `parts` left in it, its dominant source and
/// combination made as the collector makes them (the first of the largest; order of
/// appearance; `unattributed` when none).
pub fn attributed(start_ns: u64, run_ns: u64, parts: Vec<Part>) -> AttributedDetour {
    let dominant = (parts.iter()).fold(None::<&Part>, |best, p| match best {
        Some(b) if b.ns >= p.ns => Some(b),
        _ => Some(p),
    });
    let combination = if parts.is_empty() {
        UNATTRIBUTED.to_string()
    } else {
        let names: Vec<&str> = parts.iter().map(|p| p.source.as_str()).collect();
        names.join("+")
    };
    AttributedDetour {
        start_ns,
        run_ns,
        source: dominant.map_or_else(|| UNATTRIBUTED.to_string(), |p| p.source.clone()),
        combination,
        explained_ns: parts.iter().map(|p| p.ns).sum::<u64>().min(run_ns),
        parts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Header;

    fn part(source: &str, start_ns: u64, ns: u64) -> Part {
        Part {
            source: source.into(),
            start_ns,
            ns,
        }
    }

    /// CPU 3, window 0..10 000 ns, threshold 50 ns: a detour at 100 of 1 000 ns =
    /// timer 300 + sched 200 + task:x 400 (+ 100 unattributed); one at 5 000 of 600 ns, all
    /// timer; one at 8 000 of 120 ns, timer 90 + 30 unattributed.
    fn sample() -> (Trace, Attribution) {
        let parts = [
            vec![
                part("timer", 100, 300),
                part("sched", 400, 200),
                part("task:x", 600, 400),
            ],
            vec![part("timer", 5_000, 600)],
            vec![part("timer", 8_000, 90)],
        ];
        let runs = [(100, 1_000), (5_000, 600), (8_000, 120)];
        let detours: Vec<Detour> = (runs.iter())
            .map(|&(start_ns, run_ns)| Detour { start_ns, run_ns })
            .collect();
        let mut trace = Trace {
            header: Header {
                threshold_ns: 50.0,
                ..Header::default()
            },
            streams: vec![Stream::from_detours(3, 0, 10_000, &detours).unwrap()],
            ..Trace::default()
        };
        trace.sync_header();
        let cpu = CpuAttribution {
            cpu: 3,
            end_ns: 10_000,
            detours: (runs.iter().zip(parts))
                .map(|(&(s, r), p)| attributed(s, r, p))
                .collect(),
            ..CpuAttribution::default()
        };
        let a = Attribution {
            cpus: vec![cpu],
            ..Attribution::default()
        };
        (trace, a)
    }

    fn sel(names: &[&str]) -> Vec<Selector> {
        names.iter().map(|n| n.parse().unwrap()).collect()
    }

    /// Dropping the timer shortens the mixed detour by the timer's net 300 ns (start kept,
    /// sleeps rederived), empties the all-timer one, and leaves the third 30 ns long, under the
    /// 50 ns threshold: dropped and counted. The header and the attribution say what is left.
    #[test]
    fn dropping_a_source_removes_its_net_time_and_nothing_else() {
        let (t, a) = sample();
        let f = filter(&t, &a, &SourceFilter::drop(sel(&["timer"]))).unwrap();
        let s = &f.trace.streams[0];
        assert_eq!(s.records.len(), 1);
        assert_eq!((s.records[0].start_ns, s.records[0].run_ns), (100, 700));
        assert_eq!(s.records[0].sleep_ns, 10_000 - 800);
        f.trace.validate().unwrap();
        assert_eq!((f.emptied, f.below_threshold, f.shortened), (1, 1, 1));
        assert_eq!(f.removed_ns, t.streams[0].noise_ns() - s.noise_ns());
        assert_eq!(f.removed_ns, 300 + 600 + 120);
        let labels = &f.trace.header.labels;
        assert_eq!(labels[LABEL_FILTER], "drop timer");
        assert_eq!(labels[LABEL_REMOVED_NS], "1020");
        let d = &f.attribution.cpus[0].detours[0];
        assert_eq!(d.combination, "sched+task:x");
        assert_eq!((d.source.as_str(), d.explained_ns), ("task:x", 600));
        assert_eq!(d.unattributed_ns(), 100);
        // A second filter adds to the labels.
        let g = filter(
            &f.trace,
            &f.attribution,
            &SourceFilter::drop(sel(&["task"])),
        )
        .unwrap();
        assert_eq!(g.trace.header.labels[LABEL_FILTER], "drop timer; drop task");
        assert_eq!(g.trace.header.labels[LABEL_REMOVED_NS], "1420");
        assert_eq!(g.trace.streams[0].records[0].run_ns, 300);
    }

    /// Keeping a category keeps only its sources' net time (the unattributed rest goes too,
    /// unless named).
    #[test]
    fn keeping_a_category_keeps_only_its_time() {
        let (t, a) = sample();
        let f = filter(&t, &a, &SourceFilter::keep(sel(&["category:preemption"]))).unwrap();
        let runs: Vec<u64> = f.trace.streams[0]
            .records
            .iter()
            .map(|r| r.run_ns)
            .collect();
        assert_eq!(runs, vec![400]);
        let f = filter(
            &t,
            &a,
            &SourceFilter::keep(sel(&["category:periodic", "unattributed"])),
        )
        .unwrap();
        let runs: Vec<u64> = f.trace.streams[0]
            .records
            .iter()
            .map(|r| r.run_ns)
            .collect();
        assert_eq!(runs, vec![400, 600, 120]);
        assert_eq!(f.attribution.cpus[0].detours[0].combination, "timer");
        // Dropping everything leaves a valid trace without detours.
        let all = sel(&["timer", "sched", "task", "unattributed"]);
        let f = filter(&t, &a, &SourceFilter::drop(all)).unwrap();
        assert!(f.trace.streams[0].records.is_empty());
        assert_eq!(f.removed_ns, t.streams[0].noise_ns());
    }

    /// With wake-ups, dropping `task:x` takes the whole mixed detour (its timer 300, sched 200,
    /// task 400 and 100 unattributed) and nothing of the detours without the task; the net rule
    /// keeps the other 600 ns of it. A keep filter ignores wake-ups.
    #[test]
    fn a_dropped_tasks_wakeup_path_goes_with_it() {
        let (t, a) = sample();
        let f = SourceFilter::drop(sel(&["task:x"])).with_wakeups();
        let w = filter(&t, &a, &f).unwrap();
        let runs: Vec<u64> = w.trace.streams[0]
            .records
            .iter()
            .map(|r| r.run_ns)
            .collect();
        assert_eq!(runs, vec![600, 120]);
        assert_eq!((w.removed_ns, w.wakeups, w.emptied), (1_000, 1, 1));
        assert_eq!(
            w.trace.header.labels[LABEL_FILTER],
            "drop task:x with wake-ups"
        );
        let net = filter(&t, &a, &SourceFilter::drop(sel(&["task:x"]))).unwrap();
        assert_eq!(net.trace.streams[0].records[0].run_ns, 600);
        assert_eq!((net.removed_ns, net.wakeups), (400, 0));
        // Dropping the timer with wake-ups is the net rule: no task is dropped.
        let timer = SourceFilter::drop(sel(&["timer"])).with_wakeups();
        let tw = filter(&t, &a, &timer).unwrap();
        let tn = filter(&t, &a, &SourceFilter::drop(sel(&["timer"]))).unwrap();
        assert_eq!(tw.trace.streams, tn.trace.streams);
        let keep = SourceFilter::keep(sel(&["task:x"])).with_wakeups();
        assert_eq!(
            filter(&t, &a, &keep).unwrap().trace.streams[0].records[0].run_ns,
            400
        );
    }

    #[test]
    fn selectors_match_labels_kinds_and_categories() {
        let s = |x: &str| x.parse::<Selector>().unwrap();
        assert!(s("task").matches("task:kworker/0:1"));
        assert!(!s("task").matches("taskx"));
        assert!(s("task:x").matches("task:x") && !s("task:x").matches("task:y"));
        assert!(s("softirq").matches("softirq:RCU"));
        assert!(s("category:io").matches("irq:virtio0"));
        assert!(s("category:I/O").matches("softirq:NET_RX"));
        assert!(s("category:periodic").matches("softirq:TIMER"));
        assert!(!s("category:periodic").matches("softirq:RCU"));
        assert!(s("unattributed").matches(UNATTRIBUTED));
        assert_eq!(s("category:page_fault").to_string(), "category:page_fault");
        let e = "category:nope".parse::<Selector>().unwrap_err().to_string();
        assert!(e.contains("unknown category `nope`"), "{e}");
        assert!("".parse::<Selector>().is_err());
    }

    #[test]
    fn another_traces_attribution_is_refused() {
        let (t, mut a) = sample();
        assert!(filter(&t, &a, &SourceFilter::drop(vec![])).is_err());
        a.cpus[0].detours[1].run_ns += 1;
        let e = filter(&t, &a, &SourceFilter::drop(sel(&["timer"]))).unwrap_err();
        assert!(e.to_string().contains("detour 1 of CPU 3"), "{e}");
        a.cpus[0].detours.pop();
        let e = filter(&t, &a, &SourceFilter::drop(sel(&["timer"]))).unwrap_err();
        assert!(
            e.to_string().contains("holds 2 detours, the trace 3"),
            "{e}"
        );
        a.cpus[0].cpu = 4;
        let e = filter(&t, &a, &SourceFilter::drop(sel(&["timer"]))).unwrap_err();
        assert!(e.to_string().contains("no entry for CPU 3"), "{e}");
    }
}
