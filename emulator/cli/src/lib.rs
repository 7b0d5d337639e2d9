//! `jitter-emulator-cli`: the command lines of every tool that replays a trace, and the
//! emulator's own tools. The flag groups every replaying tool spells alike (`ReplayArgs`,
//! `OverrideArgs`, `SalvageArgs`, `CalibrationArgs`: `replay-bench` flattens them too), and the
//! command lines of `jitter-emulate` and `jitter-inject` (`emulate_main`, `inject_main`, which
//! their thin `main`s call), with the calibration's progress bar (`progress`). Here and not in
//! `jitter-emulator`, whose library the preload library links into users' MPI ranks: no clap,
//! no progress bar there.

pub mod calibration_bar;

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use jitter_collect::clock::Clock;

use std::path::PathBuf;

use jitter_emulator::calibration::Calibration;
use jitter_emulator::fidelity::{run_drift, run_fidelity, DriftConfig, FidelityConfig};
use jitter_emulator::plan::{TimerKind, MAX_DETOUR_NS};
use jitter_emulator::process::ProcessCalibration;
use jitter_emulator::realtime::{Realtime, Watchdog};
use jitter_emulator::setup::{Fraction, Overrides, ReplaySetup, Scale, SetupOverrides};
use jitter_trace::units::parse_positive_duration;
use jitter_trace::Salvage;

use crate::calibration_bar::CalibrationBar;

/// `--salvage`, the same in every replaying tool: whether to go on with a trace that lacks
/// detours (ring loss, damage, truncation; [`jitter_trace::integrity`]).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct SalvageArgs {
    /// Go on with a trace that lacks detours (its ring dropped some, a chunk is damaged, the
    /// file is truncated), printing the share kept, instead of refusing it.
    #[arg(long)]
    pub salvage: bool,
}

impl SalvageArgs {
    /// The policy's choice.
    pub fn choice(self) -> Salvage {
        Salvage::from_flag(self.salvage)
    }

    /// The flag as given, to pass on to another tool's command line.
    pub fn to_flags(self) -> Vec<String> {
        if self.salvage {
            vec!["--salvage".into()]
        } else {
            Vec::new()
        }
    }
}

/// O, L and M given on the command line in place of the calibrated ones (every tool that
/// replays spells them alike).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct OverrideArgs {
    /// Injector overhead O, e.g. `12us` (default: the calibrated median).
    #[arg(long, value_name = "DURATION", value_parser = parse_cost)]
    pub overhead: Option<u64>,
    /// Timer lateness L, e.g. `30us` (default: the calibrated median).
    #[arg(long, value_name = "DURATION", value_parser = parse_cost)]
    pub lateness: Option<u64>,
    /// Minimum sleep M, e.g. `50us` (default: the calibrated value).
    #[arg(long, value_name = "DURATION", value_parser = parse_cost)]
    pub min_sleep: Option<u64>,
}

impl From<OverrideArgs> for Overrides {
    fn from(a: OverrideArgs) -> Self {
        Overrides {
            overhead_ns: a.overhead,
            lateness_ns: a.lateness,
            min_sleep_ns: a.min_sleep,
        }
    }
}

/// A cost of the injector (O, L, M) given on the command line: a duration up to
/// [`MAX_DETOUR_NS`], ns.
fn parse_cost(s: &str) -> Result<u64, String> {
    let ns = jitter_trace::units::parse_duration_ns(s).map_err(|e| e.to_string())?;
    if ns > MAX_DETOUR_NS as f64 {
        return Err(format!(
            "`{s}` is longer than the bound of {} s",
            MAX_DETOUR_NS / 1_000_000_000
        ));
    }
    Ok(ns.round() as u64)
}

/// How to replay a trace, as every replaying tool spells it (`replay-bench run`, `predict`,
/// `validate`, `jitter-inject`): converted once into a [`ReplaySetup`].
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct ReplayArgs {
    /// Scale factor S: trace times (and the benchmark's quanta and period) × S, reported times
    /// ÷ S [default: 1; predict: the platform's].
    #[arg(long, value_name = "S")]
    pub scale: Option<Scale>,
    /// Stop as soon as a replay reached this fraction f of its stream (pitfall 3; paper: 1/3)
    /// [default: 1, the whole stream; predict: the platform's].
    #[arg(long, value_name = "F")]
    pub fraction: Option<Fraction>,
    /// Injector timer: itimer (setitimer, relative: errors accumulate) or abstime (timer_create,
    /// absolute deadlines) [default: abstime; predict: the platform's].
    #[arg(long, value_name = "itimer|abstime")]
    pub timer: Option<TimerKind>,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

impl ReplayArgs {
    /// The setup on a platform that costs `cost` (its timer taken unless `--timer` was given),
    /// with `base`'s S and f where these flags were not given.
    pub fn setup_over(&self, base: &ReplaySetup) -> ReplaySetup {
        self.given().setup_over(base)
    }

    /// The values these flags gave, typed.
    pub fn given(&self) -> SetupOverrides {
        SetupOverrides {
            scale: self.scale,
            fraction: self.fraction,
            timer: self.timer,
            costs: self.overrides.into(),
        }
    }

    /// These flags as given, to pass them on to another tool's command line.
    pub fn to_flags(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut push = |flag: &str, value: Option<String>| {
            if let Some(x) = value {
                v.extend([format!("--{flag}"), x]);
            }
        };
        push("scale", self.scale.map(|s| s.to_string()));
        push("fraction", self.fraction.map(|f| f.to_string()));
        push("timer", self.timer.map(|t| t.to_string()));
        let o = &self.overrides;
        push("overhead", o.overhead.map(|ns| format!("{ns}ns")));
        push("lateness", o.lateness.map(|ns| format!("{ns}ns")));
        push("min-sleep", o.min_sleep.map(|ns| format!("{ns}ns")));
        v
    }
}

/// Where the emulator's calibration of this host comes from.
#[derive(Debug, Clone, Default, Args)]
pub struct CalibrationArgs {
    /// Emulator calibration file (default: the per-host cache, measured once when missing).
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Measure the emulator calibration again and refresh the cache.
    #[arg(long)]
    pub recalibrate: bool,
}

impl CalibrationArgs {
    /// The calibration: read from the file given, else the per-host cache (measured and cached
    /// when missing, stale or `--recalibrate`; about 20 s).
    pub fn load(&self, clock: &Clock) -> Result<Calibration> {
        match &self.calibration {
            Some(p) => {
                let c = Calibration::load(p)?
                    .with_context(|| format!("calibration file {} does not exist", p.display()))?;
                if let Some(why) = c.busy() {
                    eprintln!(
                        "warning: calibration file {} was taken on a busy machine: {why}; its \
                         O, L and M include that work's time",
                        p.display()
                    );
                }
                Ok(c)
            }
            None => Calibration::load_or_measure(clock, self.recalibrate, &CalibrationBar::new())
                .context("cannot calibrate the injector"),
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
    Fidelity(FidelityArgs),
    /// Replay a periodic trace for a long time and report the drift of both timers.
    Drift(DriftArgs),
}

/// Options of `jitter-emulate fidelity`.
#[derive(Debug, Clone, Args)]
struct FidelityArgs {
    /// Trace to replay (.jtr).
    #[arg(long)]
    trace: PathBuf,
    /// Stream of the trace to replay.
    #[arg(long, default_value_t = 0)]
    stream: usize,
    #[command(flatten)]
    salvage: SalvageArgs,
    /// Scale factors S, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,3,6")]
    scale: Vec<Scale>,
    /// Timers, comma-separated (itimer, abstime).
    #[arg(long, value_delimiter = ',', default_value = "itimer,abstime")]
    timer: Vec<TimerKind>,
    /// Replay time per row (and for the baseline).
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    duration: Duration,
    /// Timeline point to start from, trace ns from the window start.
    #[arg(long, default_value_t = 0)]
    offset_ns: u64,
    /// Measure the calibration again instead of using the cache.
    #[arg(long)]
    recalibrate: bool,
    /// Leave detours longer than this out of the source (e.g. `1ms`: the 50 ms gaps that RT
    /// throttling puts into a trace collected at SCHED_FIFO), and out of the noise ratios of the
    /// baseline and the re-collected trace (S times as long in replay time: the measuring
    /// thread's own throttling stalls).
    #[arg(long, value_parser = parse_positive_duration)]
    drop_above: Option<Duration>,
    /// Also write all rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the replayed source window and every re-collected trace (trace time, ÷ S) as .jtr
    /// files into this directory, for overlay plots (`jitter-trace plot`).
    #[arg(long)]
    save: Option<PathBuf>,
    #[command(flatten)]
    overrides: OverrideArgs,
}

impl From<FidelityArgs> for FidelityConfig {
    fn from(a: FidelityArgs) -> Self {
        FidelityConfig {
            trace: a.trace,
            stream: a.stream,
            salvage: a.salvage.choice(),
            scale: a.scale,
            timer: a.timer,
            duration: a.duration,
            offset_ns: a.offset_ns,
            recalibrate: a.recalibrate,
            drop_above: a.drop_above,
            json: a.json,
            save: a.save,
            overrides: a.overrides.into(),
        }
    }
}

/// Options of `jitter-emulate drift`.
#[derive(Debug, Clone, Args)]
struct DriftArgs {
    /// Replay time per timer.
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration)]
    duration: Duration,
    /// Period of the periodic trace replayed, µs.
    #[arg(long, default_value_t = 1_000)]
    period_us: u64,
    /// Detour length of the periodic trace, µs.
    #[arg(long, default_value_t = 100)]
    run_us: u64,
    /// Timers, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "itimer,abstime")]
    timer: Vec<TimerKind>,
    #[command(flatten)]
    overrides: OverrideArgs,
}

impl From<DriftArgs> for DriftConfig {
    fn from(a: DriftArgs) -> Self {
        DriftConfig {
            duration: a.duration,
            period_us: a.period_us,
            run_us: a.run_us,
            timer: a.timer,
            overrides: a.overrides.into(),
        }
    }
}

/// Entry point of `jitter-emulate`.
pub fn emulate_main() -> Result<()> {
    let cli: EmulateCli = jitter_cli::parse();
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
            let clock = Clock::for_tools()?;
            // At SCHED_FIFO: a bug in a measurement loop must not hold the CPU forever.
            let watchdog = jitter_emulator::fidelity::arm_calibration_watchdog()?;
            let mut c = Calibration::load_or_measure(&clock, refresh, &CalibrationBar::new())?;
            drop(watchdog);
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
        Command::Fidelity(args) => run_fidelity(&args.into(), &CalibrationBar::new()),
        Command::Drift(args) => run_drift(&args.into(), &CalibrationBar::new()),
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
    /// Stop after this much replay time (default: one pass over the stream, or the fraction f
    /// of it).
    #[arg(long, value_parser = parse_positive_duration)]
    duration: Option<Duration>,
    /// Timeline point to start from, trace ns from the window start.
    #[arg(long, default_value_t = 0)]
    offset_ns: u64,
    /// S, f and the O, L, M given in place of the calibration on this CPU (with O and M both
    /// given, nothing is calibrated; L is reported only: the injector sleeps to absolute
    /// deadlines, so `--timer` can only be abstime).
    #[command(flatten)]
    replay: ReplayArgs,
    /// Measure O, L and M again even when the calibration cached for this CPU holds.
    #[arg(long)]
    recalibrate: bool,
    #[command(flatten)]
    salvage: SalvageArgs,
    /// SCHED_FIFO priority (2–99; the calibration's victim runs at 1).
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(i32).range(2..=99))]
    priority: i32,
}

/// Entry point of `jitter-inject`.
pub fn inject_main() -> Result<()> {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use jitter_emulator::plan::Plan;

    let a: InjectCli = jitter_cli::parse();
    let loaded = jitter_trace::read_trace(&a.trace)
        .with_context(|| format!("cannot read {}", a.trace.display()))?;
    let name = a.trace.display().to_string();
    let integrity = loaded.accept(&name, a.salvage.choice())?;
    for w in loaded.warnings() {
        eprintln!("warning: {name}: {w}");
    }
    anyhow::ensure!(
        a.replay.timer.unwrap_or(TimerKind::Abstime) == TimerKind::Abstime,
        "jitter-inject sleeps until absolute deadlines: --timer itimer is not available"
    );
    let overrides: Overrides = a.replay.overrides.into();
    let given = a.replay.setup_over(&ReplaySetup::ideal(TimerKind::Abstime));
    let (o_given, m_given) = (overrides.overhead_ns, overrides.min_sleep_ns);
    // Checked before calibrating: bad input is refused at once.
    let mut plan = Plan::from_trace(&loaded.trace, a.stream, given.plan_options())?;
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if a.cpu as i64 >= cpus as i64 {
        bail!("CPU {} does not exist (this machine has {cpus})", a.cpu);
    }
    let clock = Clock::for_tools()?;
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
        jitter_emulator::plan::MAX_DETOUR_NS + 1_000_000_000,
    ))
    .context("cannot arm the real-time watchdog (RLIMIT_RTTIME)")?;
    let rt = Realtime::enter(a.priority, Some(a.cpu)).map_err(|e| match e {
        nix::errno::Errno::EPERM => anyhow::anyhow!(
            "jitter-inject cannot run at SCHED_FIFO: {}",
            jitter_collect::rt_refusal::explain(e)
        ),
        nix::errno::Errno::EINVAL => {
            anyhow::anyhow!(
                "cannot pin to CPU {} (not in this process's cpuset?)",
                a.cpu
            )
        }
        e => anyhow::anyhow!("cannot enter SCHED_FIFO on CPU {}: {e}", a.cpu),
    })?;
    let setup = if o_given.is_some() && m_given.is_some() {
        given
    } else {
        let cal = injector_calibration(&clock, &a)?;
        let setup = a.replay.setup_over(&ReplaySetup {
            cost: cal.cost(),
            ..given
        });
        plan = Plan::from_trace(&loaded.trace, a.stream, setup.plan_options())?;
        setup
    };
    let one_pass =
        (plan.period_ns() as f64 * setup.scale.get() * setup.fraction.get()).round() as u64;
    let duration_ns = a.duration.map_or(one_pass, |d| d.as_nanos() as u64);
    eprintln!(
        "injecting stream {} of {} on CPU {} at SCHED_FIFO {} for {:.1} s (S = {}, O = {} ns, \
         M = {} ns); Ctrl-C stops",
        a.stream,
        a.trace.display(),
        a.cpu,
        a.priority,
        duration_ns as f64 / 1e9,
        setup.scale,
        setup.cost.overhead_ns,
        setup.cost.min_sleep_ns
    );
    let st = jitter_emulator::process::replay(plan.cursor(a.offset_ns), &clock, duration_ns, &stop);
    drop(rt);
    if let Some(kept) = integrity.kept_line() {
        println!("{name}: {kept}");
    }
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

/// `jitter-inject`'s calibration on its CPU, from the cache or measured now (and cached), its
/// source said on stderr.
fn injector_calibration(clock: &Clock, a: &InjectCli) -> Result<ProcessCalibration> {
    let (cal, why) = ProcessCalibration::load_or_measure(clock, a.cpu, a.priority, a.recalibrate)
        .map_err(|e| {
            // The calibration's victim spins at SCHED_FIFO: a budget that stops it for most of
            // each period is the likely cause, and the one to name.
            match jitter_collect::rt_budget::limit()
                .filter(jitter_collect::rt_budget::Limit::stops_spinning)
            {
                Some(l) => e.context(l.line()),
                None => e,
            }
        })
        .context("cannot calibrate the injector (give --overhead and --min-sleep)")?;
    let path = ProcessCalibration::cache_path(a.cpu);
    let source = match why {
        None => format!("cached in {}", path.display()),
        Some(_) => format!("measured now, cached in {}", path.display()),
    };
    eprintln!("calibration: {cal}; {source}");
    Ok(cal)
}
