//! The attribution sidecar of a finished collection (`--attribute`): the tracefs instance's
//! events read back, each detour of the trace labelled with its sources, the time bases
//! checked against each other, and `<trace>.attr.json` written beside the trace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jitter_trace::attribution::{self, Attribution, CpuAttribution};
use jitter_trace::steal::Steal;
use jitter_trace::Header;

use crate::attribute;
use crate::clock::Clock;
use crate::environment;
use crate::error::{Context, Result};
use crate::ring::LostSpans;
use crate::tracefs::{Instance, TraceClock};

/// What a finished collection hands to its attribution.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Collected<'a> {
    /// The trace written.
    pub(crate) output: &'a Path,
    /// The counter's clock.
    pub(crate) clock: &'a Clock,
    /// Counter value of time 0.
    pub(crate) origin: u64,
    /// The header as written.
    pub(crate) header: &'a Header,
    /// Each CPU's steal over the run.
    pub(crate) steal: &'a BTreeMap<u32, Steal>,
    /// Per stream, where its ring dropped detours (ticks).
    pub(crate) lost_spans: &'a [LostSpans],
}

/// Reads the instance's buffers (then removes it), attributes the detours of the finished
/// trace, writes `<trace>.attr.json` (with each CPU's `steal` over the run) and returns its
/// per-source report. `lost` holds, per stream, where its ring dropped detours (ticks): the
/// time-base check skips those stretches.
pub(crate) fn attribute_trace(
    inst: Instance,
    of: &Collected,
    warnings: &mut Vec<String>,
) -> Result<(PathBuf, attribution::Report)> {
    let Collected {
        output,
        clock,
        origin,
        header,
        steal,
        lost_spans,
    } = *of;
    let cpus: Vec<u32> = header.stream_cpus.clone();
    let mut per_cpu = Vec::with_capacity(cpus.len());
    for &cpu in &cpus {
        per_cpu.push(inst.read_cpu(cpu)?);
    }
    let events = inst.events.clone();
    let to_ticks = inst.to_ticks()?;
    let trace_clock = inst.clock;
    drop(inst);
    let trace = jitter_trace::read_trace(output)
        .with_context(|| format!("cannot read back {}", output.display()))?
        .trace;
    let mut result = Attribution {
        version: attribution::ATTRIBUTION_VERSION,
        collection_start_unix_ns: header.collection_start_unix_ns,
        trace_clock: trace_clock.name().into(),
        events,
        ..Attribution::default()
    };
    // Counter ticks (and trace-clock stamps through them) as the records' ns.
    let tick_ns = |t: u64| clock.ticks_to_ns(t.saturating_sub(origin));
    let to_ns = |t: u64| tick_ns(to_ticks.ticks(t));
    // The mono clock is printed to the µs (truncated): one more µs of slack.
    let slack_ns = match trace_clock {
        TraceClock::X86Tsc => 1_000,
        TraceClock::Mono => 2_000,
    };
    for (i, (stream, (raw, lost))) in trace.streams.iter().zip(per_cpu).enumerate() {
        // Where the ring dropped detours, in the records' ns: no entry there can be checked.
        let dropped = lost_spans.get(i).map(|l| attribute::Dropped {
            spans: l
                .spans
                .iter()
                .map(|&[a, b]| (tick_ns(a), tick_ns(b)))
                .collect(),
            untracked_from: l.untracked_from.map(tick_ns),
        });
        let probe_name = format!("probe-{}", stream.cpu);
        let first_comm = raw.first().map_or(probe_name.clone(), |e| e.comm.clone());
        let timeline = attribute::to_timeline(&raw, to_ns);
        let tl = attribute::segments(&timeline, &first_comm, |c| c == probe_name);
        if lost > 0 {
            warnings.push(format!(
                "CPU {}: the kernel lost {lost} trace events (buffer overrun); those detours \
                 are partly unattributed",
                stream.cpu
            ));
        }
        let (checked, outside) = attribute::misaligned(
            &stream.records,
            &tl,
            stream.begin_ns,
            stream.end_ns,
            slack_ns,
            &dropped.unwrap_or_default(),
        );
        if outside * 100 > checked && outside > 10 {
            warnings.push(format!(
                "CPU {}: {outside} of {checked} interrupt entries while the probe ran lie outside \
                 every detour: the trace clock and the counter may disagree",
                stream.cpu
            ));
        }
        result.cpus.push(CpuAttribution {
            cpu: stream.cpu,
            begin_ns: stream.begin_ns,
            end_ns: stream.end_ns,
            events: raw.len() as u64,
            events_lost: lost,
            entries_checked: checked,
            entries_outside: outside,
            steal: steal.get(&stream.cpu).copied(),
            detours: attribute::attribute(&stream.records, &tl),
        });
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if environment::runs_under_hypervisor(&cpuinfo) {
        result.notes.insert(
            "hypervisor".into(),
            "this machine is a virtual machine: time the hypervisor takes (VM exits, the host's \
             interrupts, preemption of the vCPU) is never traced by the guest kernel and shows \
             as unattributed; steal, where the host reports it, is only the time the vCPU waited \
             for a host CPU: the steal comparison above measures that part, not the exits"
                .into(),
        );
    }
    let path = attribution::sidecar_path(output);
    result
        .write(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok((path, attribution::report(&result)))
}
