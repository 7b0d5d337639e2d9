//! What a collection writes into its trace header besides the machine's facts: how it measured
//! (counter source and resolution, writer CPU, drain period, ring, policy, mode, threshold),
//! and the warning for a TSC that may mislead it.

use std::collections::BTreeMap;

use crate::clock::{kernel_tsc_khz, tsc_flags, Clock, CounterSource};
use crate::collection_config::{Config, Mode, Threshold};
use crate::counter::CounterProfile;
use crate::environment::Machine;

/// The header's `environment`: the machine's, and how this collection measures.
pub(crate) fn header_environment(
    config: &Config,
    machine: &Machine,
    clock: &Clock,
    profile: &CounterProfile,
    writer_cpu: Option<u32>,
    quantum_hint: u64,
) -> BTreeMap<String, String> {
    let mut environment = machine.environment.clone();
    environment.insert("frequency_source".into(), clock.source.to_string());
    environment.insert(
        "counter_source".into(),
        CounterSource::current().name().into(),
    );
    environment.insert(
        "counter_resolution_ticks".into(),
        profile.resolution_ticks.to_string(),
    );
    environment.insert(
        "counter_loop_ticks".into(),
        format!("{:.3}", profile.loop_ticks),
    );
    if let Some(k) = kernel_tsc_khz() {
        environment.insert("kernel_tsc_khz".into(), k.to_string());
    }
    environment.insert(
        "writer_cpu".into(),
        writer_cpu.map_or_else(
            || "shared with the probes (every allowed CPU is probed)".into(),
            |c| c.to_string(),
        ),
    );
    environment.insert(
        "drain_period_ms".into(),
        config
            .drain_period
            .map_or("end only".into(), |d| d.as_millis().to_string()),
    );
    environment.insert("ring_capacity".into(), config.ring_capacity.to_string());
    environment.insert(
        "sched".into(),
        config.sched.map_or("SCHED_OTHER".into(), |(p, prio)| {
            format!("{} {prio}", p.name())
        }),
    );
    match config.mode {
        Mode::Detours => {
            environment.insert("mode".into(), "detours".into());
        }
        Mode::Ftq(_) => {
            environment.insert("mode".into(), "ftq".into());
            environment.insert("ftq_quantum_ticks".into(), quantum_hint.to_string());
        }
    }
    if let Threshold::Factor(k) = config.threshold {
        environment.insert("threshold_factor".into(), k.to_string());
    }
    environment
}

/// The warning for a TSC that lacks `constant_tsc` or `nonstop_tsc`, if it does.
pub(crate) fn tsc_warning() -> Option<String> {
    match tsc_flags() {
        Some(f) if !f.constant || !f.nonstop => Some(format!(
            "the TSC lacks {}: detour lengths may be wrong when the CPU changes frequency or \
             sleeps",
            [
                (!f.constant).then_some("constant_tsc"),
                (!f.nonstop).then_some("nonstop_tsc")
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" and ")
        )),
        _ => None,
    }
}
