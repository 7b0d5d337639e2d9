//! Attribution of detours to kernel events: the events of one CPU become a timeline of
//! non-overlapping segments, each labelled with its innermost source (an interrupt inside a
//! softirq inside a preempting task counts to the interrupt); a detour's sources are the
//! segments inside its window, net, and what no segment covers stays `unattributed`.
//!
//! Labels: `timer`, `irq:<device>`, `softirq:<ACTION>`, `ipi:<vector>`, `irq_work`, `nmi`,
//! `work:<function>` (a work item inside its kworker), `task:<comm>` (a task other than the
//! probe ran), `idle` (the idle task ran: the probe was not runnable, e.g. RT-throttled), `page_fault:user|kernel` (a fault of the probe itself, from the fault to the next
//! event; a fault inside another task stays that task's time), and `sched`: the
//! probe's own context left running kernel code right before it is switched out and right after
//! it is switched back in (the two parts of `schedule()`, paper 002's scheduling).

use std::collections::HashMap;

use jitter_trace::attribution::{AttributedDetour, Part, UNATTRIBUTED};
use jitter_trace::Record;

use crate::tracefs::{Event, EventKind};

/// An event on the trace's time base (ns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedEvent {
    /// Time, ns on the trace's time base.
    pub ns: u64,
    /// What happened.
    pub kind: EventKind,
}

/// Converts events stamped in counter ticks to the trace's ns (`to_ns`), turns each NMI into an
/// entry/exit pair, and orders them by time (stable).
pub(crate) fn to_timeline(events: &[Event], to_ns: impl Fn(u64) -> u64) -> Vec<TimedEvent> {
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        let ns = to_ns(e.ts);
        match &e.kind {
            EventKind::Nmi { ns: d } => {
                let key = "nmi".to_string();
                out.push(TimedEvent {
                    ns: ns.saturating_sub(*d),
                    kind: EventKind::Enter {
                        key: key.clone(),
                        label: "nmi".into(),
                    },
                });
                out.push(TimedEvent {
                    ns,
                    kind: EventKind::Exit { key },
                });
            }
            EventKind::Other => {}
            k => out.push(TimedEvent {
                ns,
                kind: k.clone(),
            }),
        }
    }
    out.sort_by_key(|e| e.ns);
    out
}

/// A stretch of one CPU's time with the source that had it (`None`: the probe itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Start, ns.
    pub start: u64,
    /// End, ns (exclusive).
    pub end: u64,
    /// Innermost source, index into the label table; `None` for the probe's own time.
    pub label: Option<usize>,
    /// For `sched` (the probe's context around a switch): the switch's time; the segment counts
    /// only in the detour that contains it (elsewhere it is the probe's own time).
    pub anchor: Option<u64>,
}

/// The timeline of one CPU as segments, and the label table they index.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Segments in time order, not overlapping; the last one is open-ended.
    pub segments: Vec<Segment>,
    /// Source labels.
    pub labels: Vec<String>,
}

/// The label of a task that runs instead of the probe: `idle` for the idle task (the probe was
/// not runnable: RT throttling of a SCHED_FIFO probe, or it slept), else `task:<comm>`.
fn task_label_of(comm: &str) -> String {
    if comm.starts_with("swapper/") || comm == "<idle>" {
        "idle".into()
    } else {
        format!("task:{comm}")
    }
}

/// Builds the segments of one CPU; `first_comm` is the task current at the first event and
/// `is_probe` tells the probe's task by name.
pub fn segments(
    events: &[TimedEvent],
    first_comm: &str,
    is_probe: impl Fn(&str) -> bool,
) -> Timeline {
    let mut labels: Vec<String> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut intern = |l: &str| -> usize {
        if let Some(&i) = index.get(l) {
            return i;
        }
        labels.push(l.to_string());
        index.insert(l.to_string(), labels.len() - 1);
        labels.len() - 1
    };
    let sched = intern("sched");
    let mut task = first_comm.to_string();
    // Open handlers: (key, label index); a fault is popped by the next event.
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut segs: Vec<Segment> = Vec::with_capacity(events.len() + 1);
    let mut task_label: Option<usize> = (!is_probe(&task)).then(|| intern(&task_label_of(&task)));
    for (i, e) in events.iter().enumerate() {
        if stack.last().is_some_and(|(k, _)| k == "fault") {
            stack.pop();
        }
        match &e.kind {
            EventKind::Enter { key, label } => {
                // A handler does not nest in itself: an open one of the same key lost its exit.
                if let Some(at) = stack.iter().rposition(|(k, _)| k == key) {
                    stack.truncate(at);
                }
                let l = intern(label);
                stack.push((key.clone(), l));
            }
            EventKind::Exit { key } => {
                // An exit without its entry (it began before tracing) is ignored; an exit
                // closes handlers nested in it whose exits were lost.
                if let Some(at) = stack.iter().rposition(|(k, _)| k == key) {
                    stack.truncate(at);
                }
            }
            EventKind::Switch { prev, next } => {
                stack.clear();
                if is_probe(prev) {
                    // The probe's own kernel time before it is switched out: schedule().
                    if let Some(s) = segs.last_mut() {
                        if s.label.is_none() {
                            s.label = Some(sched);
                            s.anchor = Some(e.ns);
                        }
                    }
                }
                task = next.clone();
                task_label = (!is_probe(&task)).then(|| intern(&task_label_of(&task)));
            }
            // A fault has no exit event: in the probe's context it lasts until the next event
            // (the probe resumes when the handler returns, which ends the detour); inside
            // another task its time is that task's anyway.
            EventKind::Fault { label } if is_probe(&task) => {
                let l = intern(label);
                stack.push(("fault".into(), l));
            }
            EventKind::Fault { .. } => {}
            EventKind::Nmi { .. } | EventKind::Other => {}
        }
        let switched_in = matches!(&e.kind, EventKind::Switch { next, .. } if is_probe(next));
        let label = stack.last().map(|(_, l)| *l).or(task_label);
        let (label, anchor) = if label.is_none() && switched_in {
            (Some(sched), Some(e.ns))
        } else {
            (label, None)
        };
        let end = events.get(i + 1).map_or(u64::MAX, |n| n.ns);
        if end > e.ns {
            segs.push(Segment {
                start: e.ns,
                end,
                label,
                anchor,
            });
        }
    }
    Timeline {
        segments: segs,
        labels,
    }
}

/// Where a probe's full ring dropped detours (records' ns): the detours there are not in the
/// trace, so a moment there cannot be checked against them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Dropped {
    /// (first start, last end) of each run of dropped detours, in time order.
    pub spans: Vec<(u64, u64)>,
    /// From here on drops were not located (their list was full).
    pub untracked_from: Option<u64>,
}

impl Dropped {
    /// Whether `t` lies in a stretch with dropped detours, give or take `slack_ns`.
    fn covers(&self, t: u64, slack_ns: u64) -> bool {
        if self.untracked_from.is_some_and(|u| t + slack_ns >= u) {
            return true;
        }
        let i = self.spans.partition_point(|&(a, _)| a <= t + slack_ns);
        i > 0 && self.spans[i - 1].1 + slack_ns >= t
    }
}

/// The check of the shared time base: every moment the timeline leaves the probe's own time
/// (an interrupt or fault begins while the probe runs) inside `[begin, end)` must fall inside a
/// detour, give or take `slack_ns`; moments where the ring dropped detours (`dropped`) are not
/// checked. Returns (moments checked, moments outside every detour).
pub(crate) fn misaligned(
    records: &[Record],
    timeline: &Timeline,
    begin: u64,
    end: u64,
    slack_ns: u64,
    dropped: &Dropped,
) -> (u64, u64) {
    let (mut checked, mut outside) = (0, 0);
    for w in timeline.segments.windows(2) {
        let t = w[1].start;
        // The probe's own time: no source, or schedule() around a switch.
        let own = |g: &Segment| g.label.is_none() || g.anchor.is_some();
        if !own(&w[0]) || own(&w[1]) || t < begin || t >= end || dropped.covers(t, slack_ns) {
            continue;
        }
        checked += 1;
        // The last detour starting at or before t + slack.
        let i = records.partition_point(|r| r.start_ns <= t + slack_ns);
        let inside = i > 0 && records[i - 1].end_ns() + slack_ns >= t;
        if !inside {
            outside += 1;
        }
    }
    (checked, outside)
}

/// Attributes each record of a stream: net time per source inside its window, the dominant
/// source, the combination in order of first appearance, and the explained time.
pub fn attribute(records: &[Record], timeline: &Timeline) -> Vec<AttributedDetour> {
    let segs = &timeline.segments;
    let mut first = 0usize;
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let (s, e) = (r.start_ns, r.end_ns());
        while first < segs.len() && segs[first].end <= s {
            first += 1;
        }
        // (label, first start, net ns) in order of appearance.
        let mut parts: Vec<(usize, u64, u64)> = Vec::new();
        let mut k = first;
        while k < segs.len() && segs[k].start < e {
            let g = &segs[k];
            let anchored = g.anchor.is_none_or(|t| s <= t && t <= e);
            if let (Some(l), true) = (g.label, anchored) {
                let a = g.start.max(s);
                let b = g.end.min(e);
                if b > a {
                    match parts.iter_mut().find(|p| p.0 == l) {
                        Some(p) => p.2 += b - a,
                        None => parts.push((l, a, b - a)),
                    }
                }
            }
            k += 1;
        }
        let explained: u64 = parts.iter().map(|p| p.2).sum();
        let name = |l: usize| timeline.labels[l].clone();
        let dominant = parts
            .iter()
            .fold(None::<&(usize, u64, u64)>, |best, p| match best {
                Some(b) if b.2 >= p.2 => Some(b),
                _ => Some(p),
            })
            .map_or_else(|| UNATTRIBUTED.to_string(), |p| name(p.0));
        let combination = if parts.is_empty() {
            UNATTRIBUTED.to_string()
        } else {
            parts
                .iter()
                .map(|p| name(p.0))
                .collect::<Vec<_>>()
                .join("+")
        };
        out.push(AttributedDetour {
            start_ns: r.start_ns,
            run_ns: r.run_ns,
            source: dominant,
            combination,
            explained_ns: explained.min(r.run_ns),
            parts: parts
                .into_iter()
                .map(|(l, at, ns)| Part {
                    source: name(l),
                    start_ns: at,
                    ns,
                })
                .collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enter(ns: u64, key: &str, label: &str) -> TimedEvent {
        TimedEvent {
            ns,
            kind: EventKind::Enter {
                key: key.into(),
                label: label.into(),
            },
        }
    }
    fn exit(ns: u64, key: &str) -> TimedEvent {
        TimedEvent {
            ns,
            kind: EventKind::Exit { key: key.into() },
        }
    }
    fn switch(ns: u64, prev: &str, next: &str) -> TimedEvent {
        TimedEvent {
            ns,
            kind: EventKind::Switch {
                prev: prev.into(),
                next: next.into(),
            },
        }
    }
    fn rec(start: u64, run: u64) -> Record {
        Record {
            start_ns: start,
            run_ns: run,
            sleep_ns: 0,
        }
    }
    fn probe(c: &str) -> bool {
        c == "probe-0"
    }
    fn parts(d: &AttributedDetour) -> Vec<(&str, u64)> {
        d.parts.iter().map(|p| (p.source.as_str(), p.ns)).collect()
    }

    #[test]
    fn a_timer_with_softirq_and_a_kworker_is_one_combination_with_net_times() {
        // Detour 1000..1900: entry overhead 20, timer 1020..1100, return 10, TIMER softirq
        // 1110..1200 with a nested IPI 1150..1160, schedule 1200..1210, kworker 1210..1800
        // with a timer inside 1400..1450 and a work item 1500..1700, schedule back 1800..1850,
        // 50 ns of exit path after the last event (counted as sched: the probe's context after
        // the switch back) — and the detour ends at 1900.
        let ev = vec![
            enter(1020, "timer", "timer"),
            exit(1100, "timer"),
            enter(1110, "softirq:1", "softirq:TIMER"),
            enter(1150, "vec:call_function", "ipi:call_function"),
            exit(1160, "vec:call_function"),
            exit(1200, "softirq:1"),
            switch(1210, "probe-0", "kworker/0:1"),
            enter(1400, "timer", "timer"),
            exit(1450, "timer"),
            enter(1500, "work", "work:vmstat_update"),
            exit(1700, "work"),
            switch(1800, "kworker/0:1", "probe-0"),
            enter(5000, "timer", "timer"),
        ];
        let tl = segments(&ev, "probe-0", probe);
        let a = attribute(&[rec(1000, 900)], &tl);
        let d = &a[0];
        assert_eq!(
            parts(d),
            [
                ("timer", 80 + 50),
                ("softirq:TIMER", 90 - 10),
                ("ipi:call_function", 10),
                ("sched", 10 + 100),
                ("task:kworker/0:1", 590 - 50 - 200),
                ("work:vmstat_update", 200),
            ]
        );
        assert_eq!(
            d.combination,
            "timer+softirq:TIMER+ipi:call_function+sched+task:kworker/0:1+work:vmstat_update"
        );
        assert_eq!(d.source, "task:kworker/0:1");
        // 20 ns of entry and 10 ns between the timer's exit and the softirq stay unexplained.
        assert_eq!(d.explained_ns, 900 - 30);
        assert_eq!(d.unattributed_ns(), 30);
        assert_eq!(d.parts[4].start_ns, 1210);
    }

    #[test]
    fn detours_without_events_and_events_outside_detours_are_kept_apart() {
        let ev = vec![
            enter(100, "timer", "timer"),
            exit(150, "timer"),
            enter(1000, "irq:11", "irq:virtio0"),
            exit(1040, "irq:11"),
        ];
        let tl = segments(&ev, "probe-0", probe);
        let a = attribute(&[rec(90, 70), rec(500, 100), rec(1030, 100)], &tl);
        assert_eq!(parts(&a[0]), [("timer", 50)]);
        assert_eq!(a[0].unattributed_ns(), 20);
        assert_eq!(a[1].source, UNATTRIBUTED);
        assert_eq!(a[1].combination, UNATTRIBUTED);
        assert_eq!(a[1].explained_ns, 0);
        // Only the part of the interrupt inside the window counts.
        assert_eq!(parts(&a[2]), [("irq:virtio0", 10)]);
    }

    #[test]
    fn exits_without_entries_faults_and_nmis_are_handled() {
        let raw = vec![
            Event {
                ts: 10,
                comm: "probe-0".into(),
                kind: EventKind::Exit {
                    key: "softirq:3".into(),
                },
            },
            Event {
                ts: 100,
                comm: "probe-0".into(),
                kind: EventKind::Fault {
                    label: "page_fault:user".into(),
                },
            },
            Event {
                ts: 130,
                comm: "probe-0".into(),
                kind: EventKind::Nmi { ns: 20 },
            },
            Event {
                ts: 200,
                comm: "probe-0".into(),
                kind: EventKind::Other,
            },
        ];
        // Ticks are ns here.
        let ev = to_timeline(&raw, |t| t);
        assert_eq!(ev.len(), 4, "the NMI becomes entry + exit, the wakeup goes");
        assert_eq!(ev[2], enter(110, "nmi", "nmi"));
        let tl = segments(&ev, "probe-0", probe);
        let a = attribute(&[rec(95, 45)], &tl);
        // The fault lasts from 100 to the NMI's entry at 110; the NMI 110..130; the probe
        // runs again from 130.
        assert_eq!(parts(&a[0]), [("page_fault:user", 10), ("nmi", 20)]);
        assert_eq!(a[0].unattributed_ns(), 5 + 10);
    }

    #[test]
    fn a_fault_inside_another_task_is_that_tasks_time() {
        let ev = vec![
            switch(100, "probe-0", "daemon"),
            TimedEvent {
                ns: 150,
                kind: EventKind::Fault {
                    label: "page_fault:user".into(),
                },
            },
            switch(400, "daemon", "probe-0"),
        ];
        let tl = segments(&ev, "probe-0", probe);
        let a = attribute(&[rec(90, 320)], &tl);
        // 90..100 precedes the first event: nothing is known about it.
        assert_eq!(parts(&a[0]), [("task:daemon", 300), ("sched", 10)]);
        assert_eq!(a[0].explained_ns, 310);
    }

    #[test]
    fn interrupts_of_the_probe_outside_every_detour_are_counted() {
        let ev = vec![
            enter(100, "timer", "timer"),
            exit(150, "timer"),
            enter(1000, "timer", "timer"),
            exit(1050, "timer"),
            enter(5000, "timer", "timer"),
            exit(5050, "timer"),
        ];
        let tl = segments(&ev, "probe-0", probe);
        // Detours at 95..160 and 990..1060; the interrupt at 5000 has none; the one at 100 is
        // the first event (nothing is known before it: not checked).
        let recs = [rec(95, 65), rec(990, 70)];
        let none = Dropped::default();
        assert_eq!(misaligned(&recs, &tl, 0, 10_000, 0, &none), (2, 1));
        assert_eq!(misaligned(&recs, &tl, 0, 4_000, 0, &none), (1, 0));
        // A detour ending 5 ns before the entry at 1000: outside without slack, inside with 10.
        let recs = [rec(900, 95)];
        assert_eq!(misaligned(&recs, &tl, 0, 2_000, 0, &none), (1, 1));
        assert_eq!(misaligned(&recs, &tl, 0, 2_000, 10, &none), (1, 0));
        // Where the ring dropped detours (here 4 900 … 5 020, or untracked from 4 000), the
        // entry at 5 000 cannot be checked; a span ending before it changes nothing.
        let recs = [rec(95, 65), rec(990, 70)];
        let span = |spans: Vec<(u64, u64)>, untracked_from| Dropped {
            spans,
            untracked_from,
        };
        let at = |d: &Dropped| misaligned(&recs, &tl, 0, 10_000, 0, d);
        assert_eq!(at(&span(vec![(4_900, 5_020)], None)), (1, 0));
        assert_eq!(at(&span(vec![(200, 300), (4_000, 4_999)], None)), (2, 1));
        assert_eq!(at(&span(vec![], Some(4_000))), (1, 0));
        assert_eq!(at(&span(vec![], Some(6_000))), (2, 1));
    }

    #[test]
    fn schedule_time_counts_only_in_the_detour_of_its_switch() {
        // The probe runs from 0 (after the timer) to the switch at 10 000; an event-less
        // detour at 5 000 is not schedule() time, nor is one at 20 000 after the switch back.
        let ev = vec![
            enter(0, "timer", "timer"),
            exit(50, "timer"),
            switch(10_000, "probe-0", "kworker/0:1"),
            switch(10_500, "kworker/0:1", "probe-0"),
        ];
        let tl = segments(&ev, "probe-0", probe);
        let a = attribute(&[rec(5_000, 100), rec(9_990, 530), rec(20_000, 100)], &tl);
        assert_eq!(a[0].source, UNATTRIBUTED);
        assert_eq!(
            parts(&a[1]),
            [("sched", 10 + 20), ("task:kworker/0:1", 500)]
        );
        assert_eq!(a[2].source, UNATTRIBUTED);
    }

    #[test]
    fn a_handler_whose_exit_was_lost_ends_at_its_next_entry() {
        // The timer's exit at ~150 was lost: the timer ends where it enters again.
        let ev = vec![
            enter(100, "timer", "timer"),
            enter(1_000, "timer", "timer"),
            exit(1_040, "timer"),
        ];
        let tl = segments(&ev, "probe-0", probe);
        let a = attribute(&[rec(1_000, 100)], &tl);
        assert_eq!(parts(&a[0]), [("timer", 40)]);
        assert_eq!(a[0].unattributed_ns(), 60);
    }

    #[test]
    fn the_idle_task_is_idle() {
        let ev = vec![
            switch(100, "probe-0", "swapper/0"),
            switch(300, "swapper/0", "probe-0"),
        ];
        let tl = segments(&ev, "<idle>", probe);
        let a = attribute(&[rec(100, 210)], &tl);
        assert_eq!(parts(&a[0]), [("idle", 200), ("sched", 10)]);
    }

    #[test]
    fn a_task_that_is_current_at_the_first_event_counts() {
        let ev = vec![
            enter(100, "timer", "timer"),
            exit(120, "timer"),
            switch(300, "daemon", "probe-0"),
        ];
        let tl = segments(&ev, "daemon", probe);
        let a = attribute(&[rec(50, 300)], &tl);
        assert_eq!(
            parts(&a[0]),
            [("timer", 20), ("task:daemon", 180), ("sched", 50)]
        );
        assert_eq!(a[0].source, "task:daemon");
        assert_eq!(a[0].unattributed_ns(), 50);
    }
}
