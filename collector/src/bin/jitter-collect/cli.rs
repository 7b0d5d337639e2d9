//! The `jitter-collect` command line: arguments, their checks, and the printed table.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use jitter_collect::counter::{DEFAULT_THRESHOLD_FACTOR, PROFILE_READS};
use jitter_collect::cpuset::CpuList;
use jitter_collect::daemon::DaemonArgs;
use jitter_collect::end_table;
use jitter_collect::ftq::Quantum;
use jitter_collect::session::{collect, Config, Mode, SchedPolicy, Threshold};

/// Probe policy names on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedArg {
    /// SCHED_FIFO.
    Fifo,
    /// SCHED_RR.
    Rr,
}

/// Trace clock names on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceClockArg {
    /// The TSC: the probe's own time base.
    #[value(name = "x86-tsc")]
    X86Tsc,
    /// CLOCK_MONOTONIC (µs in the text buffer), converted to counter ticks.
    Mono,
}

/// Mode names on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Record every gap above the threshold (Algorithm 2 of paper 001).
    Detours,
    /// Count work per fixed time quantum and derive detours from missing work.
    Ftq,
}

/// Record OS jitter (detours) on every selected CPU into a .jtr trace, then print a per-CPU
/// table in osjitter's columns.
#[derive(Debug, Parser)]
#[command(
    name = "jitter-collect",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// A helper instead of a collection.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// CPUs to probe, e.g. `0,2-5` (default: every online CPU this process may run on).
    #[arg(long)]
    pub cpus: Option<String>,
    /// How long to collect: `10s`, `500ms`, `2m`, `1h`, or plain seconds.
    #[arg(short = 'd', long, allow_negative_numbers = true)]
    pub duration: Option<String>,
    /// Stop after this many detours in all CPUs (the paper collects 1 million).
    #[arg(long)]
    pub detours: Option<u64>,
    /// Threshold factor k: a gap longer than k × t_min is a detour.
    #[arg(short = 'k', long, default_value_t = DEFAULT_THRESHOLD_FACTOR)]
    pub threshold_factor: u64,
    /// Absolute threshold in ns (overrides -k).
    #[arg(long, allow_negative_numbers = true)]
    pub threshold_ns: Option<i64>,
    /// Counter frequency in kHz (default: calibrated against CLOCK_MONOTONIC_RAW).
    #[arg(long)]
    pub khz: Option<u64>,
    /// Back-to-back counter reads used to profile the counter (resolution and t_min).
    #[arg(long, default_value_t = PROFILE_READS)]
    pub t_min_reads: usize,
    /// Real-time policy for the probe threads.
    #[arg(long, value_enum)]
    pub sched: Option<SchedArg>,
    /// Real-time priority (with --sched).
    #[arg(long, default_value_t = 1)]
    pub prio: i32,
    /// Allow a real-time policy on every CPU of the machine or under a real-time budget of less
    /// than half of each period (the kernel's or the cgroup's), and accept a collection that fails
    /// the plausibility check or whose ring dropped more detours than readers accept (exit
    /// status 0; the trace is kept either way).
    #[arg(long)]
    pub force: bool,
    /// Trace file (default: jitter-<host>-<unix time>.jtr).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// A `key=value` label for the trace header (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Writer drain period in ms; 0 drains only at the end (needs a big enough --ring).
    #[arg(long, default_value_t = 100)]
    pub drain_ms: u64,
    /// Ring capacity per CPU, detours.
    #[arg(long, default_value_t = 1 << 16)]
    pub ring: usize,
    /// What to measure.
    #[arg(long, value_enum, default_value_t = ModeArg::Detours)]
    pub mode: ModeArg,
    /// FTQ quantum: `2^18cycles`, `100us`, ... (FTQ mode).
    #[arg(long, default_value = "2^18cycles")]
    pub quantum: String,
    /// FTQ series output (default: the trace path with .ftq.csv).
    #[arg(long)]
    pub ftq_csv: Option<PathBuf>,
    /// No progress bar and no warnings.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print the table as JSON (with the trace path) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Do not lock memory.
    #[arg(long)]
    pub no_mlock: bool,
    /// Attribute every detour to its kernel source (root): trace interrupts, softirqs, IPIs,
    /// context switches, work items and page faults in a private tracefs instance, write
    /// `<trace>.attr.json` and print the per-source table.
    #[arg(long)]
    pub attribute: bool,
    /// Trace clock for --attribute (default: x86-tsc where available, else mono).
    #[arg(long, value_enum)]
    pub trace_clock: Option<TraceClockArg>,
    /// Check this machine instead of collecting (about 2 s on the first of --cpus): counter,
    /// frequency, resolution, loop period, threshold, timer lateness, SIGALRM cost, and whether
    /// it is fit to collect and to replay on. Exits non-zero when unfit to collect.
    #[arg(long)]
    pub check: bool,
}

/// Helpers of `jitter-collect`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a synthetic daemon: wake every --period on --cpu, busy for --busy, then print the
    /// wake-up lateness (known noise to check collection and attribution against).
    Daemon(DaemonArgs),
}

impl Cli {
    /// Turns the arguments into a collection configuration.
    pub fn config(&self) -> Result<Config> {
        let duration = self
            .duration
            .as_deref()
            .map(jitter_trace::units::parse_positive_duration)
            .transpose()
            .context("--duration")?;
        let threshold = match self.threshold_ns {
            Some(ns) if ns <= 0 => bail!("the threshold must be positive, got {ns} ns"),
            Some(ns) => Threshold::Nanos(ns as u64),
            None => Threshold::Factor(self.threshold_factor),
        };
        let mut labels = BTreeMap::new();
        for l in &self.labels {
            let Some((k, v)) = l.split_once('=') else {
                bail!("bad label {l:?}: use key=value");
            };
            if k.trim().is_empty() {
                bail!("bad label {l:?}: the key is empty");
            }
            labels.insert(k.trim().to_string(), v.to_string());
        }
        let cpus = self
            .cpus
            .as_deref()
            .map(CpuList::parse_distinct)
            .transpose()?;
        let mode = match self.mode {
            ModeArg::Detours => Mode::Detours,
            ModeArg::Ftq => Mode::Ftq(Quantum::parse(&self.quantum)?),
        };
        let output = match &self.output {
            Some(p) => p.clone(),
            None => {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "host".into());
                let t = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                PathBuf::from(format!("jitter-{host}-{t}.jtr"))
            }
        };
        // The trace is a .jtr whatever its name: a name that says otherwise is refused.
        jitter_trace::output::check_extension(&output, "-o", "a .jtr trace", &["jtr"])?;
        if let Some(p) = &self.ftq_csv {
            jitter_trace::output::check_extension(p, "--ftq-csv", "a CSV series", &["csv"])?;
        }
        Ok(Config {
            cpus,
            duration,
            max_detours: self.detours,
            threshold,
            khz: self.khz,
            t_min_reads: self.t_min_reads,
            sched: self.sched.map(|s| {
                let p = match s {
                    SchedArg::Fifo => SchedPolicy::Fifo,
                    SchedArg::Rr => SchedPolicy::Rr,
                };
                (p, self.prio)
            }),
            force: self.force,
            output,
            labels,
            drain_period: (self.drain_ms > 0).then(|| Duration::from_millis(self.drain_ms)),
            ring_capacity: self.ring,
            mode,
            ftq_csv: self.ftq_csv.clone(),
            progress: if self.quiet {
                None
            } else {
                crate::bar::for_collection(duration)
            },
            verbose: !self.quiet,
            lock_memory: !self.no_mlock,
            handle_signals: true,
            attribute: self.attribute,
            trace_clock: self.trace_clock.map(|c| match c {
                TraceClockArg::X86Tsc => jitter_collect::tracefs::TraceClock::X86Tsc,
                TraceClockArg::Mono => jitter_collect::tracefs::TraceClock::Mono,
            }),
        })
    }
}

/// Runs the tool: collects, then prints the table (or JSON) on stdout.
pub fn run(cli: Cli) -> Result<()> {
    if let Some(Command::Daemon(args)) = &cli.command {
        let d = jitter_collect::daemon::run(args)?;
        println!("wakeups {}", d.wakeups);
        println!("wake-lateness-median-ns {}", d.lateness_median_ns);
        println!("wake-lateness-p95-ns {}", d.lateness_p95_ns);
        return Ok(());
    }
    let config = cli.config()?;
    if cli.check {
        return check(&cli, &config);
    }
    let summary = collect(&config)?;
    if cli.json {
        let text = serde_json::to_string_pretty(&summary).context("cannot encode JSON")?;
        println!("{text}");
    } else {
        println!(
            "# {}: {} CPUs, t_min {:.1} ns (loop period), resolution {:.1} ns, threshold {:.1} ns, \
             TSC {} kHz, stopped by {}",
            summary.trace.display(),
            summary.rows.len(),
            summary.t_min_ns,
            summary.resolution_ns,
            summary.threshold_ns,
            summary.tsc_khz,
            summary.stopped_by
        );
        if let Some(p) = &summary.ftq_csv {
            println!("# FTQ series: {}", p.display());
        }
        println!(
            "# writer: {} drains, {:.3} ms active, {:.3} ms CPU time, CPU {}",
            summary.self_windows,
            summary.self_ns as f64 / 1e6,
            summary.writer_cpu_ns as f64 / 1e6,
            summary
                .writer_cpu
                .map_or("shared".into(), |c| c.to_string())
        );
        print!("{}", end_table::render(&summary.rows));
        if let (Some(path), Some(report)) = (&summary.attribution_file, &summary.attribution) {
            println!("# attribution written to {}", path.display());
            print!("{}", jitter_trace::attribution::render(report));
        }
    }
    let kept = format!("the trace {} is kept", summary.trace.display());
    let mut errors: Vec<String> = (summary.implausible.iter())
        .map(|w| format!("implausible collection: {w}"))
        .collect();
    let loss = ring_loss(&summary.rows);
    match (loss.problem(), loss.acceptable()) {
        (Some(p), true) => eprintln!(
            "warning: {p} ({}; within the {} % readers accept)",
            loss.kept_line().unwrap_or_default(),
            jitter_trace::integrity::TOLERATED_LOSS_SHARE * 100.0
        ),
        (Some(p), false) => {
            let drain = if cli.drain_ms == 0 {
                "a --drain-ms above 0 (0 drains only at the end)".to_string()
            } else {
                format!("a shorter --drain-ms (now {})", cli.drain_ms)
            };
            errors.push(format!(
                "{p}: readers refuse the trace without --salvage; collect with a bigger --ring \
                 (now {}) or {drain}",
                cli.ring
            ))
        }
        (None, _) => {}
    }
    if errors.is_empty() {
        return Ok(());
    }
    if cli.force {
        for e in &errors {
            eprintln!("warning: {e} ({kept}; --force given)");
        }
        return Ok(());
    }
    for e in &errors[1..] {
        eprintln!("error: {e}");
    }
    bail!("{} ({kept}; --force accepts it)", errors[0])
}

/// What the collection's rings dropped, judged by the rule every reader of the trace applies
/// ([`jitter_trace::integrity`]).
fn ring_loss(rows: &[end_table::CpuRow]) -> jitter_trace::Integrity {
    let streams = rows
        .iter()
        .map(|r| jitter_trace::integrity::StreamLoss {
            cpu: r.cpu,
            detours_kept: r.delta,
            detours_lost: r.ovfl,
            noise_kept_ns: r.sum_intr_ns.saturating_sub(r.ovfl_ns),
            noise_lost_ns: r.ovfl_ns,
        })
        .collect();
    jitter_trace::Integrity::of_streams(streams, None)
}

/// `--check`: measures and prints the machine's fitness to collect and to replay.
fn check(cli: &Cli, config: &Config) -> Result<()> {
    let mut warnings = Vec::new();
    let clock = jitter_collect::session::choose_clock(config.khz, &mut warnings)?;
    if !cli.quiet {
        for w in &warnings {
            eprintln!("warning: {w}");
        }
    }
    // The CPU is checked like a collection's (it exists, is online, is allowed) before the
    // measurement pins a thread to it.
    let cpu = match &config.cpus {
        Some(c) => jitter_collect::cpuset::select(Some(c))?
            .ids()
            .first()
            .copied(),
        None => None,
    };
    let report = jitter_collect::check::run(cpu, clock)?;
    if cli.json {
        let text = serde_json::to_string_pretty(&report).context("cannot encode JSON")?;
        println!("{text}");
    } else {
        print!("{report}");
    }
    if let Err(why) = &report.collect_verdict {
        bail!("this machine is not fit {why}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_thresholds_are_checked() {
        let cli = Cli::parse_from(["jc", "--label", "a=b", "--threshold-ns", "500", "-d", "1"]);
        let c = cli.config().unwrap();
        assert_eq!(c.labels["a"], "b");
        assert_eq!(c.threshold, Threshold::Nanos(500));
        let cli = Cli::parse_from(["jc", "--label", "ab"]);
        assert!(cli.config().is_err());
        let cli = Cli::parse_from(["jc", "--threshold-ns", "-5"]);
        assert!(cli.config().unwrap_err().to_string().contains("positive"));
    }

    #[test]
    fn an_output_named_for_another_format_is_refused() {
        let cli = Cli::parse_from(["jc", "-d", "1", "-o", "x.csv"]);
        assert_eq!(
            cli.config().unwrap_err().to_string(),
            "-o x.csv: this writes a .jtr trace, but the name ends in .csv; name it .jtr"
        );
        let cli = Cli::parse_from(["jc", "-d", "1", "-o", "x.jtr", "--ftq-csv", "f.json"]);
        assert!(cli
            .config()
            .unwrap_err()
            .to_string()
            .starts_with("--ftq-csv f.json"));
        for ok in ["x.jtr", "/dev/null", "x.trace"] {
            Cli::parse_from(["jc", "-d", "1", "-o", ok])
                .config()
                .unwrap();
        }
    }
}
