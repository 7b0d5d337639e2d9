//! The threads of a collection: one pinned probe per CPU (profiled, released by two barriers,
//! then the probe loop), the writer that drains their rings, and the abort that releases
//! probes waiting at a barrier.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use crate::collection_config::{Config, Mode, SchedPolicy};
use crate::counter::CounterProfile;
use crate::cpuset::{self, CpuList};
use crate::error::{CollectError, Context, Result};
use crate::ftq;
use crate::probe::{self, LoopStats};
use crate::ring::{LostSpans, RingProducer};
use crate::writer::Writer;

/// What the probe threads share with the collecting thread: the barriers' rendezvous, the
/// values published between them, the stop and abort flags, and what each probe reports.
pub(crate) struct Shared {
    pub(crate) barrier: Barrier,
    pub(crate) abort: AtomicBool,
    pub(crate) threshold: AtomicU64,
    pub(crate) deadline: AtomicU64,
    pub(crate) origin: AtomicU64,
    pub(crate) quantum: AtomicU64,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) profiles: Mutex<Vec<Option<CounterProfile>>>,
    pub(crate) full: Vec<AtomicU64>,
    pub(crate) errors: Mutex<Vec<String>>,
}

/// What one probe thread measured and lost.
pub(crate) struct ProbeOutcome {
    pub(crate) stats: LoopStats,
    pub(crate) lost: u64,
    pub(crate) lost_ticks: u64,
    /// Where the full ring dropped detours (counter ticks).
    pub(crate) lost_spans: LostSpans,
    pub(crate) invol_ctx: u64,
    pub(crate) ran: bool,
}

fn invol_switches() -> u64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD)
        .map(|u| u.involuntary_context_switches() as u64)
        .unwrap_or(0)
}

/// CPU time of the calling thread so far, ns.
fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

fn set_policy(policy: SchedPolicy, prio: i32) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 names the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy.raw(), &param) };
    if rc != 0 {
        return Err(CollectError::Refused(format!(
            "cannot set {} priority {prio}: {}",
            policy.name(),
            crate::rt_refusal::explain(nix::errno::Errno::last())
        )));
    }
    Ok(())
}

/// What one probe thread is started with.
struct ProbeTask {
    /// The probe's place in CPU order (its slot in `Shared`).
    index: usize,
    /// The CPU it is pinned to.
    cpu: u32,
    /// Its end of the ring.
    producer: RingProducer,
    /// What the probes share with the collecting thread.
    shared: Arc<Shared>,
    /// Real-time policy and priority, if any.
    sched: Option<(SchedPolicy, i32)>,
    /// Back-to-back reads that profile the counter.
    t_min_reads: usize,
    /// Detours or FTQ.
    mode: Mode,
    /// FTQ mode's quantum, ticks.
    quantum_hint: u64,
}

/// One probe: pinned, profiled, released by the barriers, then Algorithm 2 (or FTQ) until
/// the deadline or the stop flag.
fn probe_thread(task: ProbeTask) -> ProbeOutcome {
    let ProbeTask {
        index,
        cpu,
        mut producer,
        shared,
        sched,
        t_min_reads,
        mode,
        quantum_hint,
    } = task;
    let mut outcome = ProbeOutcome {
        stats: LoopStats::default(),
        lost: 0,
        lost_ticks: 0,
        lost_spans: LostSpans::default(),
        invol_ctx: 0,
        ran: false,
    };
    let setup = (|| -> Result<()> {
        cpuset::pin_current_thread(&[cpu])?;
        if let Some((p, prio)) = sched {
            set_policy(p, prio).with_context(|| format!("CPU {cpu}"))?;
        }
        let profile = CounterProfile::measure(t_min_reads);
        shared.profiles.lock().unwrap_or_else(|p| p.into_inner())[index] = Some(profile);
        if matches!(mode, Mode::Ftq(_)) {
            shared.full[index].store(ftq::full_count(quantum_hint, 32), Ordering::Relaxed);
        }
        Ok(())
    })();
    if let Err(e) = setup {
        let msg = e.line();
        shared
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(msg);
        shared.abort.store(true, Ordering::Release);
    }
    shared.barrier.wait(); // A: set up, t_min known
    shared.barrier.wait(); // B: threshold and origin published, go
    if shared.abort.load(Ordering::Acquire) {
        return outcome;
    }
    let threshold = shared.threshold.load(Ordering::Acquire);
    let deadline = shared.deadline.load(Ordering::Acquire);
    let origin = shared.origin.load(Ordering::Acquire);
    let ctx0 = invol_switches();
    outcome.stats = match mode {
        Mode::Detours => probe::run(threshold, deadline, &shared.stop, |a, b| {
            producer.push([a, b], b - a);
            std::ops::ControlFlow::Continue(())
        }),
        Mode::Ftq(_) => {
            let quantum = shared.quantum.load(Ordering::Acquire);
            ftq::run(quantum, origin, deadline, u64::MAX, &shared.stop, |s, c| {
                producer.push([s, c], 0)
            })
        }
    };
    outcome.invol_ctx = invol_switches().saturating_sub(ctx0);
    outcome.lost = producer.lost();
    outcome.lost_ticks = producer.lost_ticks();
    outcome.lost_spans = producer.take_lost_spans();
    outcome.ran = true;
    outcome
}

/// Starts one probe thread per CPU, in CPU order.
pub(crate) fn spawn_probes(
    config: &Config,
    cpus: &CpuList,
    shared: &Arc<Shared>,
    producers: Vec<RingProducer>,
    quantum_hint: u64,
) -> Result<Vec<thread::JoinHandle<ProbeOutcome>>> {
    let mut probes = Vec::with_capacity(cpus.len());
    for (i, (&cpu, producer)) in cpus.ids().iter().zip(producers).enumerate() {
        let task = ProbeTask {
            index: i,
            cpu,
            producer,
            shared: shared.clone(),
            sched: config.sched,
            t_min_reads: config.t_min_reads,
            mode: config.mode,
            quantum_hint,
        };
        let h = thread::Builder::new()
            .name(format!("probe-{cpu}"))
            .stack_size(256 << 10)
            .spawn(move || probe_thread(task))
            .context("cannot start a probe thread")?;
        probes.push(h);
    }
    Ok(probes)
}

/// Starts the writer thread (pinned to `writer_cpu` if any): it drains the rings every
/// `period` until `done` is set.
pub(crate) fn spawn_writer(
    writer: Writer,
    period: Option<Duration>,
    writer_cpu: Option<u32>,
    done: Arc<AtomicBool>,
) -> Result<WriterThread> {
    thread::Builder::new()
        .name("jtr-writer".into())
        .spawn(move || {
            if let Some(c) = writer_cpu {
                let _ = cpuset::pin_current_thread(&[c]);
            }
            let mut writer = writer;
            let r = writer.run(period, &done);
            (writer, r, thread_cpu_ns())
        })
        .context("cannot start the writer thread")
}

/// Releases the probes waiting on barrier B with the abort flag set, waits for them, and
/// returns `e`.
pub(crate) fn release_to_abort(
    shared: &Shared,
    probes: Vec<thread::JoinHandle<ProbeOutcome>>,
    e: CollectError,
) -> CollectError {
    shared.abort.store(true, Ordering::Release);
    shared.barrier.wait(); // B
    for h in probes {
        let _ = h.join();
    }
    e
}

/// The writer thread's result: the writer, how its run ended, and its CPU time in ns.
pub(crate) type WriterThread = thread::JoinHandle<(Writer, Result<()>, u64)>;
