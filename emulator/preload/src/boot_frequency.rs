//! The counter's frequency, chosen once per boot: the first process of a boot measures it
//! (`Clock::for_tools`, 200 ms against the monotonic clock, checked against the kernel's) and
//! leaves it beside the host's calibration cache under the boot's id; every later process (each
//! rank of each later run) reads it back in microseconds. The frequency of the counter cannot
//! change before the machine reboots, and 200 ms per process is most of what the library's
//! start-up would otherwise cost (the start-up `replay-bench app` reports).

use std::path::PathBuf;
use std::sync::OnceLock;

use jitter_collect::clock::{Clock, FrequencySource};
use jitter_emulator::calibration::Calibration;

static CLOCK: OnceLock<Clock> = OnceLock::new();

/// This process's clock.
pub(crate) fn clock() -> Result<Clock, String> {
    if let Some(c) = CLOCK.get() {
        return Ok(*c);
    }
    let c = match cached() {
        Some(c) => c,
        None => {
            let c = Clock::for_tools().map_err(|e| format!("counter: {e}"))?;
            keep(&c);
            c
        }
    };
    Ok(*CLOCK.get_or_init(|| c))
}

/// The file of this boot's frequency.
fn path() -> Option<PathBuf> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot: String = boot
        .trim()
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    if boot.is_empty() {
        return None;
    }
    let dir = Calibration::cache_path().parent()?.to_path_buf();
    Some(dir.join(format!("counter-khz-{boot}.txt")))
}

/// This boot's frequency, if a process measured it.
fn cached() -> Option<Clock> {
    let text = std::fs::read_to_string(path()?).ok()?;
    let khz: u64 = text.split_whitespace().next()?.parse().ok()?;
    Clock::from_khz(khz, FrequencySource::Calibrated).ok()
}

/// Leaves `c`'s frequency for the later processes of this boot (a failure only costs them the
/// measurement).
fn keep(c: &Clock) {
    if c.source == FrequencySource::Nanoseconds {
        return;
    }
    if let Some(p) = path() {
        if let Some(d) = p.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let line = format!(
            "{} kHz, measured by process {}\n",
            c.khz(),
            std::process::id()
        );
        let _ = jitter_trace::output::write_output_bytes(&p, line.as_bytes());
    }
}
