//! The text summary of a profile (`replay-bench profile show`): the job, the main loop's calls
//! with the distribution of the compute before each, and the ranks.

use std::fmt::Write;

use jitter_trace::table::Table;

use crate::profile::{MainLoop, Profile};
use crate::site::{Call, Site};
use crate::structure::LoopStructure;

fn ms(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

/// What the call does, in a few words.
pub fn describe(s: &Site) -> String {
    let mut out = s.call.name().to_string();
    if s.bytes > 0 {
        let _ = write!(out, " {} B", s.bytes);
    }
    if let Some(p) = s.peer() {
        let dir = if matches!(s.call, Call::Recv | Call::Irecv) {
            "from"
        } else {
            "to"
        };
        let _ = write!(out, " {dir} {p:+}");
    }
    if let Some(src) = s.source() {
        let _ = write!(out, " from {src:+}");
    } else if let Some(root) = s.root() {
        let _ = write!(out, " root {root}");
    }
    if s.call == Call::Waitall {
        let _ = write!(out, " ({} requests)", s.requests);
    }
    if s.comm_size > 0 {
        let _ = write!(out, " on {}", s.comm_size);
    }
    out
}

/// What the loop is made of: set-up, output, the kinds of iteration and their shares.
fn structure_lines(st: &LoopStructure) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  found in rank {}'s last {} of {} calls: {} calls of set-up before it ({}), {} calls \
         after it ({}); the loop holds {:.1} % of the calls kept and took {}",
        st.rank,
        st.kept_calls,
        st.calls,
        st.setup_calls,
        ms(st.setup_ns as f64),
        st.output_calls,
        ms(st.output_ns as f64),
        100.0 * st.call_share,
        ms(st.loop_ns as f64)
    );
    if st.kept_calls < st.calls {
        let _ = writeln!(
            out,
            "  the record keeps the last {} calls: the loop's earlier iterations are not in it",
            st.kept_calls
        );
    }
    let mut t = Table::new([
        "kind",
        "calls",
        "iterations",
        "share of calls",
        "recurs",
        "differs from the body",
    ])
    .left(1)
    .align(5, jitter_trace::table::Align::Left);
    for (v, k) in st.variants.iter().enumerate() {
        t.row([
            if v == 0 {
                "body".into()
            } else {
                format!("variant {v}")
            },
            k.calls.to_string(),
            k.iterations.to_string(),
            format!("{:.1} %", 100.0 * k.call_share),
            match k.every {
                Some(1) => "every iteration".into(),
                Some(e) => format!("every {e} iterations"),
                None if k.iterations == 1 => "once".into(),
                None => "irregularly".into(),
            },
            if v == 0 {
                "-".into()
            } else {
                k.differs.clone()
            },
        ]);
    }
    out.push_str(&t.render());
    out.push_str(&replayed_lines(st));
    out
}

/// What a prediction replays of the loop and what it leaves out.
fn replayed_lines(st: &LoopStructure) -> String {
    let mut out = String::new();
    let kinds = st.variants.len();
    if kinds > 1 && st.replayed_call_share == 0.0 {
        // A profile of version 3 or older: the body only.
        out.push_str(
            "the slots below are the body's; a prediction replays the body every iteration (the \
             variants' extra calls are not replayed)\n",
        );
    } else if kinds > 1 && !st.kinds_replayed {
        let _ = writeln!(
            out,
            "the slots below are the body's; a prediction replays the body every iteration: its \
             iterations hold {:.1} % of rank {}'s compute, at least {:.0} % of the loop's (the \
             other kinds' extra calls are not replayed)",
            100.0 * st.body_compute_share,
            st.rank,
            100.0 * crate::structure::BODY_STANDS_FOR_ALL
        );
    } else if kinds > 1 {
        let _ = writeln!(
            out,
            "a prediction replays each iteration as its kind ({} of {kinds} kinds), in the \
             recorded order: {:.1} % of rank {}'s compute and {:.1} % of its calls kept (the body \
             alone: {:.1} % of the compute, under {:.0} % of the loop's)",
            kinds - st.kinds_left_out,
            100.0 * st.replayed_compute_share,
            st.rank,
            100.0 * st.replayed_call_share,
            100.0 * st.body_compute_share,
            100.0 * crate::structure::BODY_STANDS_FOR_ALL
        );
        out.push_str("the slots below are the body's (the other kinds' are in the profile)\n");
    }
    let mut left = vec![
        format!("{} calls of set-up", st.setup_calls),
        format!("{} calls after the loop", st.output_calls),
    ];
    if st.kinds_left_out > 0 {
        left.push(format!(
            "the {} rarest kinds (beyond {} calls of kinds kept)",
            st.kinds_left_out,
            crate::structure::MAX_KIND_CALLS
        ));
    }
    let replayed = if st.replayed_call_share > 0.0 {
        st.replayed_compute_share
    } else {
        st.compute_share
    };
    let _ = writeln!(
        out,
        "left out of the replay: {} ({:.1} % of the compute)",
        left.join(", "),
        100.0 * (1.0 - replayed).max(0.0)
    );
    out
}

/// The body's calls with the compute before each.
fn slot_table(l: &MainLoop, st: Option<&LoopStructure>) -> String {
    let mut out = String::new();
    let mut t = Table::new([
        "slot",
        "call",
        "compute mean (95 % CI)",
        "p50",
        "p90",
        "p99",
        "n",
        "in call",
    ])
    .left(2);
    for (j, s) in l.slots.iter().enumerate() {
        let c = &s.compute;
        let mut call = describe(&s.site);
        if let Some((_, lo, hi)) = st.and_then(|st| st.sizes_vary.iter().find(|v| v.0 == j)) {
            let _ = write!(call, " (bytes vary: {lo}–{hi})");
        }
        t.row([
            format!("{j}{}", if s.shared { "*" } else { "" }),
            call,
            format!("{} ± {}", ms(c.mean_ns), ms(c.mean_ci95_ns())),
            ms(c.p50_ns as f64),
            ms(c.p90_ns as f64),
            ms(c.p99_ns as f64),
            c.count.to_string(),
            ms(s.call_mean_ns),
        ]);
    }
    out.push_str(&t.render());
    if l.slots.iter().any(|s| s.shared) {
        out.push_str(
            "* the same pair of calls occurs at two slots: their compute is counted together\n",
        );
    }
    out.push_str(
        "compute = the time before the call since the previous MPI call ended; quantiles within \
         1.6 %\n",
    );
    out
}

/// The summary, ending in a newline.
pub fn render(p: &Profile, shown: &str) -> String {
    let mut out = String::new();
    let calls: u64 = p.reported.iter().map(|r| r.calls).sum();
    let _ = writeln!(
        out,
        "profile {shown}: program {}, {} ranks ({} reported, {} missing), {calls} MPI calls",
        p.program,
        p.ranks,
        p.reported.len(),
        p.missing.len()
    );
    if let Some(c) = &p.cartesian {
        let _ = writeln!(
            out,
            "Cartesian topology: dims {:?}, periodic {:?}",
            c.dims, c.periods
        );
    }
    match (&p.main_loop, &p.structure) {
        (None, _) => {
            let _ = writeln!(
                out,
                "no main loop: no sequence of call shapes repeats three times in any rank (the \
                 loop search compares calls, peers and communicators, not sizes)"
            );
        }
        (Some(l), Some(st)) if st.recorded => {
            let _ = writeln!(
                out,
                "no main loop: no repeating sequence of call shapes holds {:.0} % of the compute; \
                 the loop is rank {}'s recorded sequence as it is, one iteration of {} calls \
                 from the end of MPI_Init to MPI_Finalize ({}), replayed as recorded: growing it \
                 to N ranks assumes every rank makes rank {}'s calls to the same relative peers",
                100.0 * crate::structure::MIN_LOOP_COMPUTE_SHARE,
                st.rank,
                l.slots.len(),
                ms(st.loop_ns as f64),
                st.rank
            );
        }
        (Some(l), st) => {
            let _ = writeln!(
                out,
                "main loop: {} calls per iteration, {} iterations, ranks {:?}; {:.1} % of rank \
                 {}'s compute time is in it",
                l.slots.len(),
                l.iterations,
                l.ranks,
                100.0 * l.compute_share,
                l.ranks.first().copied().unwrap_or(0)
            );
            if let Some(st) = st {
                out.push_str(&structure_lines(st));
            }
            out.push_str(&slot_table(l, st.as_ref()));
        }
    }
    let mut t = Table::new([
        "rank",
        "host",
        "state",
        "calls",
        "compute",
        "in MPI",
        "loop",
        "loop time",
        "start-up",
    ])
    .left(3);
    for r in &p.reported {
        t.row([
            r.rank.to_string(),
            r.host.clone(),
            if r.finished { "finished" } else { "died" }.to_string(),
            r.calls.to_string(),
            ms(r.compute_ns as f64),
            ms(r.mpi_ns as f64),
            match (r.loop_period, r.in_main_loop) {
                (Some(_), true) => "main".to_string(),
                (Some(n), false) => format!("other ({n} calls)"),
                (None, _) => "none".to_string(),
            },
            r.timing
                .and_then(|t| t.loop_ns())
                .map_or("-".into(), |ns| ms(ns as f64)),
            r.timing.map_or("-".into(), |t| ms(t.startup_ns as f64)),
        ]);
    }
    out.push_str(&t.render());
    out.push_str(
        "loop time = from the end of the call before the loop's first iteration to the end of its \
         last; start-up = the preload library's part of MPI_Init\n",
    );
    let unknown: u64 = p.reported.iter().map(|r| r.unknown_sites).sum();
    if unknown > 0 {
        let _ = writeln!(
            out,
            "left out: {unknown} calls at sites beyond the record's table of {} (their shapes are \
             unknown to the loop search)",
            crate::record::SITES
        );
    }
    if !p.missing.is_empty() {
        let _ = writeln!(out, "missing ranks: {:?}", p.missing);
    }
    out
}
