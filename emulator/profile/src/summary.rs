//! The text summary of a profile (`replay-bench profile show`): the job, the main loop's calls
//! with the distribution of the compute before each, and the ranks.

use std::fmt::Write;

use jitter_trace::table::Table;

use crate::profile::Profile;
use crate::site::{Call, Site};

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
    match &p.main_loop {
        None => {
            let _ = writeln!(
                out,
                "no main loop: no sequence of calls repeats three times in any rank"
            );
        }
        Some(l) => {
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
                t.row([
                    format!("{j}{}", if s.shared { "*" } else { "" }),
                    describe(&s.site),
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
                    "* the same pair of calls occurs at two slots: their compute is counted \
                     together\n",
                );
            }
            out.push_str(
                "compute = the time before the call since the previous MPI call ended; \
                 quantiles within 1.6 %\n",
            );
        }
    }
    let mut t = Table::new([
        "rank", "host", "state", "calls", "compute", "in MPI", "loop",
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
        ]);
    }
    out.push_str(&t.render());
    if !p.missing.is_empty() {
        let _ = writeln!(out, "missing ranks: {:?}", p.missing);
    }
    out
}
