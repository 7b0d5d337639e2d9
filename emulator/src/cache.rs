//! Where calibrations are cached and when a cached one no longer holds: a calibration is valid
//! for one machine (host name), kernel release, CPU model and, for the separate-process
//! injector, one CPU; a change of any of them, or `--recalibrate`, measures again.
//!
//! Directory: `$XDG_CACHE_HOME/jitterbench`, else `$HOME/.cache/jitterbench`, else the
//! temporary directory's `jitterbench`.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// What a calibration was measured on; a cached one is reused only on the same key.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MachineKey {
    /// Host name.
    pub host: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// The CPU measured on (None: any CPU, as the in-process emulator runs wherever its rank
    /// does).
    pub cpu: Option<usize>,
    /// The cost a simulated slow host added to every SIGALRM, ns (`jitter_collect::slow_signals`;
    /// 0 on a real host): a calibration of the simulated host never serves the real one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub simulated_signal_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl MachineKey {
    /// The key of this machine now, for `cpu`.
    pub fn current(cpu: Option<usize>) -> MachineKey {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        MachineKey {
            host: read_trimmed("/proc/sys/kernel/hostname"),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            cpu_model: cpu_model(&cpuinfo, cpu).unwrap_or_else(|| "unknown".into()),
            cpu,
            // A bad value is refused where the spin is armed; here it only keys the cache.
            simulated_signal_ns: jitter_collect::slow_signals::requested_ns().unwrap_or(0),
        }
    }

    /// Why a calibration measured on `self` does not hold on `now`; None when it does.
    pub fn stale_because(&self, now: &MachineKey) -> Option<String> {
        let fields = [
            ("host", &self.host, &now.host),
            ("kernel", &self.kernel, &now.kernel),
            ("CPU model", &self.cpu_model, &now.cpu_model),
        ];
        for (what, was, is) in fields {
            if was != is {
                return Some(format!("{what} changed ({was:?} → {is:?})"));
            }
        }
        if self.cpu != now.cpu {
            return Some(format!("measured on CPU {:?}, not {:?}", self.cpu, now.cpu));
        }
        if self.simulated_signal_ns != now.simulated_signal_ns {
            return Some(format!(
                "measured with {} ns added to every SIGALRM (a simulated slow host), now {} ns",
                self.simulated_signal_ns, now.simulated_signal_ns
            ));
        }
        None
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The `model name` of `cpu` (the first one listed when None or not found) in /proc/cpuinfo's
/// text; None when no entry has one (e.g. some ARM kernels).
pub fn cpu_model(cpuinfo: &str, cpu: Option<usize>) -> Option<String> {
    let mut current: Option<usize> = None;
    let mut first: Option<String> = None;
    for line in cpuinfo.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "processor" {
            current = v.parse().ok();
        } else if k == "model name" {
            if cpu.is_some() && current == cpu {
                return Some(v.to_string());
            }
            first.get_or_insert_with(|| v.to_string());
        }
    }
    first
}

/// The directory of every cached calibration (see the module's doc).
pub(crate) fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("jitterbench")
}

/// `s` with every character other than ASCII alphanumerics, `.`, `-` and `_` replaced by `_`
/// (safe in a file name).
pub fn file_name_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether to reuse a cached calibration or measure a new one, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The cached calibration holds.
    Reuse,
    /// Measure: the reason, for the user.
    Measure(String),
}

/// Reuse `cached` (its key) on `now` unless missing, stale or `recalibrate`.
pub(crate) fn decide(cached: Option<&MachineKey>, now: &MachineKey, recalibrate: bool) -> Decision {
    match cached {
        _ if recalibrate => Decision::Measure("--recalibrate asked for it".into()),
        None => Decision::Measure("no calibration cached for this machine".into()),
        Some(k) => match k.stale_because(now) {
            Some(why) => Decision::Measure(format!("the cached calibration is stale: {why}")),
            None => Decision::Reuse,
        },
    }
}

/// Seconds since the Unix epoch now.
pub(crate) fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A calibration's age for people: `measured 3 min ago`, `measured 2.5 h ago`, `… 4 d ago`.
pub(crate) fn age(measured_unix_s: u64, now_unix_s: u64) -> String {
    let s = now_unix_s.saturating_sub(measured_unix_s);
    if s < 120 {
        format!("measured {s} s ago")
    } else if s < 2 * 3600 {
        format!("measured {} min ago", s / 60)
    } else if s < 2 * 86_400 {
        format!("measured {:.1} h ago", s as f64 / 3600.0)
    } else {
        format!("measured {} d ago", s / 86_400)
    }
}

/// This host's name and kernel release.
pub fn host_and_kernel() -> (String, String) {
    let k = MachineKey::current(None);
    (k.host, k.kernel)
}

/// The warning a calibration taken on a busy machine is written with, `why` its evidence.
pub(crate) fn busy_warning(why: &str, path: &Path) -> String {
    format!(
        "the calibration was taken on a busy machine: {why}; its O, L and M include that work's \
         time; it is kept in {} with that evidence and measured again when next needed (calibrate \
         on a quiet machine: jitter-emulate calibrate --refresh)",
        path.display()
    )
}

/// Reads a cached JSON value; `Ok(None)` when the file does not exist, an error naming the file
/// and what to do when it cannot be read or parsed.
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Option<T>> {
    match std::fs::read_to_string(path) {
        Ok(s) => serde_json::from_str(&s).map(Some).map_err(|e| {
            anyhow::anyhow!(
                "calibration {} is unreadable ({e}): measure it again with `jitter-emulate \
                 calibrate --refresh` (`--recalibrate` in replay-bench run and jitter-inject), or \
                 delete the file",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    }
}

/// Writes `value` as pretty JSON to `path` (creating the directory).
pub fn write_json<T: Serialize>(value: &T, path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    let s = serde_json::to_string_pretty(value)?;
    jitter_trace::output::write_output_bytes(path, s.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> MachineKey {
        MachineKey {
            host: "node1".into(),
            kernel: "6.1.0-18-amd64".into(),
            cpu_model: "AMD EPYC".into(),
            cpu: Some(1),
            simulated_signal_ns: 0,
        }
    }

    #[test]
    fn a_cached_calibration_is_reused_only_on_the_same_machine_kernel_model_and_cpu() {
        let k = key();
        assert_eq!(decide(Some(&k), &k, false), Decision::Reuse);
        assert!(matches!(decide(None, &k, false), Decision::Measure(_)));
        let Decision::Measure(why) = decide(Some(&k), &k, true) else {
            panic!("--recalibrate reused the cache");
        };
        assert!(why.contains("--recalibrate"), "{why}");
        let changes = [
            (
                MachineKey {
                    kernel: "6.1.0-20-amd64".into(),
                    ..key()
                },
                "kernel changed",
            ),
            (
                MachineKey {
                    cpu_model: "Intel Xeon".into(),
                    ..key()
                },
                "CPU model changed",
            ),
            (
                MachineKey {
                    host: "node2".into(),
                    ..key()
                },
                "host changed",
            ),
            (
                MachineKey {
                    cpu: Some(0),
                    ..key()
                },
                "CPU Some(1)",
            ),
            (
                MachineKey {
                    simulated_signal_ns: 25_000,
                    ..key()
                },
                "simulated slow host",
            ),
        ];
        for (now, says) in changes {
            match decide(Some(&k), &now, false) {
                Decision::Measure(why) => assert!(why.contains(says), "{why}"),
                Decision::Reuse => panic!("stale calibration reused on {now:?}"),
            }
        }
    }

    #[test]
    fn the_model_name_is_that_of_the_asked_cpu() {
        let info = "processor\t: 0\nmodel name\t: AMD EPYC 7763\nflags\t: a:b\n\n\
                    processor\t: 1\nmodel name\t: Intel Core i9\n";
        assert_eq!(cpu_model(info, Some(1)).as_deref(), Some("Intel Core i9"));
        assert_eq!(cpu_model(info, Some(0)).as_deref(), Some("AMD EPYC 7763"));
        assert_eq!(cpu_model(info, None).as_deref(), Some("AMD EPYC 7763"));
        assert_eq!(cpu_model(info, Some(7)).as_deref(), Some("AMD EPYC 7763"));
        assert_eq!(cpu_model("processor : 0\nBogoMIPS : 50\n", Some(0)), None);
    }

    #[test]
    fn file_name_parts_and_ages_are_plain() {
        assert_eq!(file_name_part("a b/c:1.2-x_y"), "a_b_c_1.2-x_y");
        assert_eq!(age(100, 130), "measured 30 s ago");
        assert_eq!(age(0, 600), "measured 10 min ago");
        assert_eq!(age(0, 9_000), "measured 2.5 h ago");
        assert_eq!(age(0, 5 * 86_400), "measured 5 d ago");
        assert!(cache_dir().ends_with("jitterbench"));
    }
}
