//! Command lines of the `jitter-emulate` and `jitter-inject` binaries (thin `main`s call these).

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use jitter_collect::clock::Clock;

use crate::calibration::{Calibration, Overrides};
use crate::process::ProcessCalibration;
use crate::realtime::{Realtime, Watchdog};
use jitter_trace::units::parse_positive_duration;

/// The counter clock by the collector's one rule (`Clock::choose`); its warning goes to stderr.
pub fn counter_clock() -> Result<Clock> {
    let (clock, warning) = Clock::choose(None)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    Ok(clock)
}

/// Calibration values given on the command line in place of the measured ones.
#[derive(Debug, Clone, Copy, Args)]
pub struct OverrideArgs {
    /// Injector overhead O, ns (default: the measured median).
    #[arg(long)]
    pub overhead_ns: Option<u64>,
    /// Timer lateness L, ns (default: the measured median).
    #[arg(long)]
    pub lateness_ns: Option<u64>,
    /// Minimum sleep M, ns (default: the measured value).
    #[arg(long)]
    pub min_sleep_ns: Option<u64>,
}

impl From<OverrideArgs> for Overrides {
    fn from(a: OverrideArgs) -> Self {
        Overrides {
            overhead_ns: a.overhead_ns,
            lateness_ns: a.lateness_ns,
            min_sleep_ns: a.min_sleep_ns,
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "jitter-emulate",
    version,
    about = "Calibrate the in-process jitter injector and measure how faithfully it replays a trace"
)]
struct EmulateCli {
    /// Measure at normal priority (by default the measuring thread runs at SCHED_FIFO 50 when
    /// permitted, so that other processes do not preempt it).
    #[arg(long, global = true)]
    no_fifo: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure O, L and M for both timers, print the report and cache it.
    Calibrate {
        /// Measure again even if a cached calibration exists.
        #[arg(long)]
        refresh: bool,
        /// Print the calibration as JSON instead of the report.
        #[arg(long)]
        json: bool,
        /// Let replays take O after each gap from the O-by-rate sweep (`on`, used only when
        /// the sweep agreed with the main O run) or one O for all (`off`, the default); saved
        /// in the cache.
        #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
        overhead_by_gap: Option<String>,
    },
    /// Replay a trace into a probe loop and compare the re-collected trace with the source.
    Fidelity(crate::fidelity::FidelityArgs),
    /// Replay a periodic trace for a long time and report the drift of both timers.
    Drift(crate::fidelity::DriftArgs),
}

/// Entry point of `jitter-emulate`.
pub fn emulate_main() -> Result<()> {
    let cli: EmulateCli = jitter_trace::cli::parse();
    let _rt = if cli.no_fifo {
        None
    } else {
        match Realtime::enter(50, None) {
            Ok(g) => Some(g),
            Err(e) => {
                eprintln!(
                    "warning: cannot run at SCHED_FIFO ({e}): measurements include preemption by \
                     other processes"
                );
                None
            }
        }
    };
    match cli.command {
        Command::Calibrate {
            refresh,
            json,
            overhead_by_gap,
        } => {
            let clock = counter_clock()?;
            let mut c = Calibration::load_or_measure(&clock, refresh)?;
            if let Some(v) = overhead_by_gap {
                c.use_overhead_by_gap(v == "on");
                c.save(&Calibration::cache_path())?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&c)?);
            } else {
                print!("{c}");
                println!("cached in {}", Calibration::cache_path().display());
            }
            Ok(())
        }
        Command::Fidelity(args) => crate::fidelity::run_fidelity(&args),
        Command::Drift(args) => crate::fidelity::run_drift(&args),
    }
}

/// Options of `jitter-inject`.
#[derive(Debug, Parser)]
#[command(
    name = "jitter-inject",
    version,
    about = "Replay a trace's jitter on one CPU from a separate process (pinned, SCHED_FIFO), so \
             that any unmodified program on that CPU sees it"
)]
struct InjectCli {
    /// Trace to replay (.jtr).
    #[arg(long)]
    trace: std::path::PathBuf,
    /// CPU to inject on.
    #[arg(long)]
    cpu: usize,
    /// Stream of the trace to replay.
    #[arg(long, default_value_t = 0)]
    stream: usize,
    /// Scale factor S for run- and sleep-times.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Stop after this much replay time (default: one pass over the stream, fraction 1).
    #[arg(long, value_parser = parse_positive_duration)]
    duration: Option<Duration>,
    /// Timeline point to start from, trace ns from the window start.
    #[arg(long, default_value_t = 0)]
    offset_ns: u64,
    /// O, L and M given in place of the calibration on this CPU (with O and M both given,
    /// nothing is calibrated; L is reported only, absolute deadlines do not use it).
    #[command(flatten)]
    overrides: OverrideArgs,
    /// Measure O, L and M again even when the calibration cached for this CPU holds.
    #[arg(long)]
    recalibrate: bool,
    /// SCHED_FIFO priority (2–99; the calibration's victim runs at 1).
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(i32).range(2..=99))]
    priority: i32,
}

/// Entry point of `jitter-inject`.
pub fn inject_main() -> Result<()> {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use crate::plan::{Plan, PlanOptions, TimerKind};

    let a: InjectCli = jitter_trace::cli::parse();
    let loaded = jitter_trace::read_trace(&a.trace)
        .with_context(|| format!("cannot read {}", a.trace.display()))?;
    for w in loaded.warnings() {
        eprintln!("warning: {w}");
    }
    let given = |o: Option<u64>, m: Option<u64>| PlanOptions {
        scale: a.scale,
        overhead_ns: o.unwrap_or(0),
        min_sleep_ns: m.unwrap_or(0),
        lateness_ns: 0,
        fraction: 1.0,
        timer: TimerKind::Abstime,
        ..PlanOptions::ideal()
    };
    let (o_given, m_given) = (a.overrides.overhead_ns, a.overrides.min_sleep_ns);
    // Checked before calibrating: bad input is refused at once.
    let mut plan = Plan::from_trace(&loaded.trace, a.stream, given(o_given, m_given))?;
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if a.cpu as i64 >= cpus as i64 {
        bail!("CPU {} does not exist (this machine has {cpus})", a.cpu);
    }
    let clock = counter_clock()?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install the SIGINT/SIGTERM handler")?;
    }
    let _ = nix::sys::mman::mlockall(
        nix::sys::mman::MlockAllFlags::MCL_CURRENT | nix::sys::mman::MlockAllFlags::MCL_FUTURE,
    );
    // No planned injection spins longer than MAX_DETOUR_NS; one second more without sleeping
    // is a bug, and the watchdog ends the process instead of holding the CPU.
    let _watchdog = Watchdog::arm(Duration::from_nanos(
        crate::plan::MAX_DETOUR_NS + 1_000_000_000,
    ))
    .context("cannot arm the real-time watchdog (RLIMIT_RTTIME)")?;
    let rt = Realtime::enter(a.priority, Some(a.cpu)).map_err(|e| match e {
        nix::errno::Errno::EPERM => anyhow::anyhow!(
            "jitter-inject needs CAP_SYS_NICE to run at SCHED_FIFO (run it as root, or grant \
             the capability: setcap cap_sys_nice+ep jitter-inject)"
        ),
        nix::errno::Errno::EINVAL => {
            anyhow::anyhow!(
                "cannot pin to CPU {} (not in this process's cpuset?)",
                a.cpu
            )
        }
        e => anyhow::anyhow!("cannot enter SCHED_FIFO on CPU {}: {e}", a.cpu),
    })?;
    let opts = if o_given.is_some() && m_given.is_some() {
        given(o_given, m_given)
    } else {
        let (cal, why) =
            ProcessCalibration::load_or_measure(&clock, a.cpu, a.priority, a.recalibrate)
                .context("cannot calibrate the injector (give --overhead-ns and --min-sleep-ns)")?;
        let source = match why {
            None => format!(
                "cached in {}",
                ProcessCalibration::cache_path(a.cpu).display()
            ),
            Some(_) => format!(
                "measured now, cached in {}",
                ProcessCalibration::cache_path(a.cpu).display()
            ),
        };
        eprintln!("calibration: {cal}; {source}");
        let opts = given(
            Some(o_given.unwrap_or(cal.overhead.median_ns.max(0.0).round() as u64)),
            Some(m_given.unwrap_or(cal.min_sleep_ns)),
        );
        plan = Plan::from_trace(&loaded.trace, a.stream, opts)?;
        opts
    };
    let one_pass = (plan.period_ns() as f64 * a.scale) as u64;
    let duration_ns = a.duration.map_or(one_pass, |d| d.as_nanos() as u64);
    eprintln!(
        "injecting stream {} of {} on CPU {} at SCHED_FIFO {} for {:.1} s (S = {}, O = {} ns, \
         M = {} ns); Ctrl-C stops",
        a.stream,
        a.trace.display(),
        a.cpu,
        a.priority,
        duration_ns as f64 / 1e9,
        a.scale,
        opts.overhead_ns,
        opts.min_sleep_ns
    );
    let st = crate::process::replay(plan.cursor(a.offset_ns), &clock, duration_ns, &stop);
    drop(rt);
    println!(
        "{} injections, {:.3} s busy in {:.3} s; wake-up lateness mean {:.1} µs, max {:.1} µs{}",
        st.injected,
        st.busy_ns as f64 / 1e9,
        st.elapsed_ns as f64 / 1e9,
        st.lateness_mean_ns / 1e3,
        st.lateness_max_ns as f64 / 1e3,
        if st.interrupted {
            " (stopped by signal)"
        } else {
            ""
        }
    );
    Ok(())
}
