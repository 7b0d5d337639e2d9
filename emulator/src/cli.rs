//! Command lines of the `jitter-emulate` and `jitter-inject` binaries (thin `main`s call these).

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use jitter_collect::clock::{kernel_tsc_khz, Clock, FrequencySource};

use crate::calibration::{Calibration, Overrides};
use crate::realtime::Realtime;

/// The counter clock: the kernel's TSC frequency when exposed, else measured over 300 ms.
pub fn counter_clock() -> Result<Clock> {
    if let Some(khz) = kernel_tsc_khz() {
        return Ok(Clock::from_khz(khz, FrequencySource::Kernel)?);
    }
    Ok(Clock::calibrate(Duration::from_millis(300))?)
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
    },
    /// Replay a trace into a probe loop and compare the re-collected trace with the source.
    Fidelity(crate::fidelity::FidelityArgs),
    /// Replay a periodic trace for a long time and report the drift of both timers.
    Drift(crate::fidelity::DriftArgs),
}

/// Parses a duration like `10s`, `500ms`, `2m` or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let (num, mult) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix("us") {
        (v, 1e-6)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('m') {
        (v, 60.0)
    } else {
        (s, 1.0)
    };
    let x: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("bad duration '{s}' (use e.g. 10s, 500ms, 2m)"))?;
    if !x.is_finite() || x <= 0.0 {
        bail!("duration '{s}' must be positive");
    }
    Ok(Duration::from_secs_f64(x * mult))
}

/// Entry point of `jitter-emulate`.
pub fn emulate_main() -> Result<()> {
    let cli = EmulateCli::parse();
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
        Command::Calibrate { refresh, json } => {
            let clock = counter_clock()?;
            let c = Calibration::load_or_measure(&clock, refresh)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        for bad in ["", "x", "-1s", "0", "nan"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
