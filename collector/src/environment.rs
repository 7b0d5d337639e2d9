//! The machine configuration that explains the noise: kernel, command line, clocksource, HZ,
//! governor, and per-CPU interrupt, softirq and steal counts (snapshots and their deltas).

use std::collections::BTreeMap;
use std::fs;
use std::time::Instant;

use jitter_trace::steal::Steal;
use nix::unistd::{sysconf, SysconfVar};

/// Static facts about the machine, read once at collection start.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Machine {
    /// Host name.
    pub host: String,
    /// Kernel release (`uname -r`).
    pub kernel_release: String,
    /// Kernel command line.
    pub kernel_cmdline: String,
    /// CPU model name.
    pub cpu_model: String,
    /// `key → value` facts for the trace header's environment map.
    pub environment: BTreeMap<String, String>,
}

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Reads the machine facts (missing files give "unknown", never an error).
pub(crate) fn machine() -> Machine {
    let host = read_trim("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into());
    let kernel_release =
        read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into());
    let kernel_cmdline = read_trim("/proc/cmdline").unwrap_or_default();
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name") || l.starts_with("Model") || l.starts_with("cpu\t"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let mut env = BTreeMap::new();
    let unknown = || "unknown".to_string();
    env.insert(
        "clocksource".into(),
        read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_else(unknown),
    );
    env.insert(
        "hz".into(),
        kernel_hz(&kernel_release).unwrap_or_else(unknown),
    );
    env.insert("governor".into(), governors());
    for key in [
        "isolcpus",
        "nohz_full",
        "rcu_nocbs",
        "nohz",
        "irqaffinity",
        "idle",
        "tsc",
    ] {
        env.insert(
            key.into(),
            cmdline_value(&kernel_cmdline, key).unwrap_or_else(|| "-".into()),
        );
    }
    if let Some(flags) = crate::clock::tsc_flags() {
        env.insert("constant_tsc".into(), flags.constant.to_string());
        env.insert("nonstop_tsc".into(), flags.nonstop.to_string());
    }
    env.insert(
        "counter".into(),
        crate::clock::CounterSource::current().name().into(),
    );
    let virt = if runs_under_hypervisor(&cpuinfo) {
        "hypervisor"
    } else {
        "none detected"
    };
    env.insert("virtualization".into(), virt.into());
    Machine {
        host,
        kernel_release,
        kernel_cmdline,
        cpu_model,
        environment: env,
    }
}

/// Whether `/proc/cpuinfo` text shows the `hypervisor` flag (a virtual machine).
pub(crate) fn runs_under_hypervisor(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor"))
}

/// USER_HZ, the unit of `/proc/stat`'s times (`None` where sysconf does not say).
pub fn user_hz() -> Option<u64> {
    sysconf(SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|hz| u64::try_from(hz).ok())
        .filter(|&hz| hz > 0)
}

/// The value of `key=...` on a kernel command line (`Some("")` for a bare flag).
pub(crate) fn cmdline_value(cmdline: &str, key: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .find_map(|w| match w.split_once('=') {
            Some((k, v)) if k == key => Some(v.to_string()),
            None if w == key => Some(String::new()),
            _ => None,
        })
}

/// CONFIG_HZ of the running kernel, from `/boot/config-<release>` when that file exists.
fn kernel_hz(release: &str) -> Option<String> {
    let text = fs::read_to_string(format!("/boot/config-{release}")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .map(str::to_string)
}

/// The distinct cpufreq governors of all CPUs (`none` when cpufreq is absent).
fn governors() -> String {
    let mut found: Vec<String> = Vec::new();
    if let Ok(dir) = fs::read_dir("/sys/devices/system/cpu/cpufreq") {
        for e in dir.flatten() {
            if let Some(g) = read_trim(&format!("{}/scaling_governor", e.path().display())) {
                if !found.contains(&g) {
                    found.push(g);
                }
            }
        }
    }
    if found.is_empty() {
        "none (no cpufreq)".into()
    } else {
        found.sort();
        found.join(",")
    }
}

/// Per-CPU counters read at one instant: hardware interrupts, softirqs by kind, steal time.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct IrqSnapshot {
    /// `/proc/interrupts`: line name → per-CPU counts (index = CPU id).
    pub interrupts: BTreeMap<String, Vec<u64>>,
    /// `/proc/softirqs`: kind → per-CPU counts.
    pub softirqs: BTreeMap<String, Vec<u64>>,
    /// `/proc/stat` steal time per CPU, in USER_HZ ticks.
    pub steal: BTreeMap<u32, u64>,
    /// When the files were read (`None`: not read, as in tests).
    pub taken: Option<Instant>,
}

/// Parses a `/proc/interrupts`- or `/proc/softirqs`-style table into name → per-CPU counts.
pub(crate) fn parse_per_cpu_table(text: &str) -> BTreeMap<String, Vec<u64>> {
    let mut lines = text.lines();
    let Some(head) = lines.next() else {
        return BTreeMap::new();
    };
    let cpu_ids: Vec<usize> = head
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect();
    let width = cpu_ids.iter().max().map_or(0, |m| m + 1);
    let mut out = BTreeMap::new();
    for line in lines {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let mut counts = vec![0u64; width];
        let mut any = false;
        for (slot, word) in cpu_ids.iter().zip(rest.split_whitespace()) {
            match word.parse::<u64>() {
                Ok(v) => {
                    counts[*slot] = v;
                    any = true;
                }
                Err(_) => break,
            }
        }
        if any {
            out.insert(name.trim().to_string(), counts);
        }
    }
    out
}

/// Parses per-CPU steal time (8th value of each `cpuN` line) from `/proc/stat`.
pub(crate) fn parse_steal(text: &str) -> BTreeMap<u32, u64> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let cpu: u32 = w.next()?.strip_prefix("cpu")?.parse().ok()?;
            let steal = w.nth(7)?.parse().ok()?;
            Some((cpu, steal))
        })
        .collect()
}

impl IrqSnapshot {
    /// Reads the three files now (unreadable files give empty maps).
    pub fn take() -> Self {
        let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
        IrqSnapshot {
            interrupts: parse_per_cpu_table(&read("/proc/interrupts")),
            softirqs: parse_per_cpu_table(&read("/proc/softirqs")),
            steal: parse_steal(&read("/proc/stat")),
            taken: Some(Instant::now()),
        }
    }

    /// The steal time of each of `cpus` between `self` and `later` that both snapshots have,
    /// in ticks of 1 s / USER_HZ (none where USER_HZ is unknown).
    pub(crate) fn steal_of(&self, later: &IrqSnapshot, cpus: &[u32]) -> BTreeMap<u32, Steal> {
        let Some(tick_ns) = user_hz().map(|hz| 1_000_000_000 / hz) else {
            return BTreeMap::new();
        };
        cpus.iter()
            .filter_map(|&cpu| Some((cpu, self.steal_since(later, cpu, tick_ns)?)))
            .collect()
    }

    /// The steal time of `cpu` between `self` and `later`, ticks of `tick_ns` (`None` when a
    /// snapshot lacks the CPU or its time).
    pub(crate) fn steal_since(&self, later: &IrqSnapshot, cpu: u32, tick_ns: u64) -> Option<Steal> {
        let (before, after) = (self.steal.get(&cpu)?, later.steal.get(&cpu)?);
        let window = later.taken?.checked_duration_since(self.taken?)?;
        Some(Steal {
            ticks: after.saturating_sub(*before),
            tick_ns,
            window_ns: u64::try_from(window.as_nanos()).unwrap_or(u64::MAX),
        })
    }

    /// Per-CPU deltas `later − self` for `cpus`, as notes: one JSON object per key
    /// (`interrupts`, `softirqs`: `{cpu: {name: delta}}` without zero entries; `steal_ticks`:
    /// `{cpu: ticks}`), and `user_hz`, the ticks per second (when sysconf says).
    pub(crate) fn delta_notes(
        &self,
        later: &IrqSnapshot,
        cpus: &[u32],
    ) -> BTreeMap<String, String> {
        let table = |a: &BTreeMap<String, Vec<u64>>, b: &BTreeMap<String, Vec<u64>>| {
            let mut per_cpu = serde_json::Map::new();
            for &cpu in cpus {
                let mut m = serde_json::Map::new();
                let mut total = 0u64;
                for (name, after) in b {
                    let before = a.get(name).and_then(|v| v.get(cpu as usize)).copied();
                    let after = after.get(cpu as usize).copied();
                    if let (Some(x), Some(y)) = (before, after) {
                        let d = y.saturating_sub(x);
                        if d > 0 {
                            m.insert(name.clone(), d.into());
                            total += d;
                        }
                    }
                }
                m.insert("total".into(), total.into());
                per_cpu.insert(cpu.to_string(), serde_json::Value::Object(m));
            }
            serde_json::Value::Object(per_cpu).to_string()
        };
        let mut notes = BTreeMap::new();
        notes.insert(
            "interrupts".into(),
            table(&self.interrupts, &later.interrupts),
        );
        notes.insert("softirqs".into(), table(&self.softirqs, &later.softirqs));
        let mut steal = serde_json::Map::new();
        for &cpu in cpus {
            if let (Some(a), Some(b)) = (self.steal.get(&cpu), later.steal.get(&cpu)) {
                steal.insert(cpu.to_string(), b.saturating_sub(*a).into());
            }
        }
        notes.insert(
            "steal_ticks".into(),
            serde_json::Value::Object(steal).to_string(),
        );
        if let Some(hz) = user_hz() {
            notes.insert("user_hz".into(), hz.to_string());
        }
        notes
    }

    /// Total interrupts + softirqs of `cpu` between `self` and `later`.
    pub(crate) fn total_delta(&self, later: &IrqSnapshot, cpu: u32) -> (u64, u64) {
        let sum = |a: &BTreeMap<String, Vec<u64>>, b: &BTreeMap<String, Vec<u64>>| {
            b.iter()
                .map(|(n, v)| {
                    let y = v.get(cpu as usize).copied().unwrap_or(0);
                    let x = a
                        .get(n)
                        .and_then(|v| v.get(cpu as usize))
                        .copied()
                        .unwrap_or(0);
                    y.saturating_sub(x)
                })
                .sum()
        };
        (
            sum(&self.interrupts, &later.interrupts),
            sum(&self.softirqs, &later.softirqs),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       
  0:         38          0   IO-APIC   2-edge      timer
LOC:     123456      65432   Local timer interrupts
ERR:          0
";

    #[test]
    fn parses_interrupt_tables_and_deltas() {
        let t = parse_per_cpu_table(INTERRUPTS);
        assert_eq!(t["LOC"], vec![123456, 65432]);
        assert_eq!(t["0"], vec![38, 0]);
        assert!(!t.contains_key("ERR") || t["ERR"][0] == 0);
        let before = IrqSnapshot {
            interrupts: t.clone(),
            ..Default::default()
        };
        let mut after = before.clone();
        after.interrupts.get_mut("LOC").unwrap()[1] += 100;
        assert_eq!(before.total_delta(&after, 1), (100, 0));
        let notes = before.delta_notes(&after, &[1]);
        let v: serde_json::Value = serde_json::from_str(&notes["interrupts"]).unwrap();
        assert_eq!(v["1"]["LOC"], 100);
        assert_eq!(v["1"]["total"], 100);
    }

    #[test]
    fn parses_steal_and_cmdline() {
        let stat =
            "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 42 0 0\ncpu1 1 2 3 4 5 6 7 5 0 0\n";
        let s = parse_steal(stat);
        assert_eq!(s[&0], 42);
        assert_eq!(s[&1], 5);
        let cmd = "ro quiet isolcpus=2-3 nohz_full=2-3 rcu_nocb_poll";
        assert_eq!(cmdline_value(cmd, "isolcpus").as_deref(), Some("2-3"));
        assert_eq!(cmdline_value(cmd, "rcu_nocb_poll").as_deref(), Some(""));
        assert_eq!(cmdline_value(cmd, "rcu_nocbs"), None);
    }

    #[test]
    fn steal_between_two_snapshots_is_their_delta_over_their_interval() {
        let t0 = Instant::now();
        let at = |ticks: &[(u32, u64)], after: std::time::Duration| IrqSnapshot {
            steal: ticks.iter().copied().collect(),
            taken: Some(t0 + after),
            ..Default::default()
        };
        let before = at(&[(0, 40), (1, 7)], std::time::Duration::ZERO);
        let after = at(&[(0, 43), (1, 7)], std::time::Duration::from_millis(2_500));
        let s = before.steal_since(&after, 0, 10_000_000).unwrap();
        assert_eq!(
            (s.ticks, s.tick_ns, s.window_ns),
            (3, 10_000_000, 2_500_000_000)
        );
        assert_eq!(s.ns(), 30_000_000);
        assert_eq!(before.steal_since(&after, 1, 10_000_000).unwrap().ticks, 0);
        // A CPU missing from a snapshot, or a snapshot without its time: not recorded.
        assert_eq!(before.steal_since(&after, 2, 10_000_000), None);
        let untimed = IrqSnapshot {
            taken: None,
            ..after.clone()
        };
        assert_eq!(before.steal_since(&untimed, 0, 10_000_000), None);
        // An empty /proc/stat gives no steal at all.
        let empty = IrqSnapshot {
            steal: parse_steal(""),
            ..after
        };
        assert_eq!(before.steal_since(&empty, 0, 10_000_000), None);
    }

    #[test]
    fn the_hypervisor_flag_is_read_from_the_flags_line_only() {
        assert!(runs_under_hypervisor(
            "model name\t: AMD EPYC\nflags\t\t: fpu tsc hypervisor lahf_lm\n"
        ));
        assert!(!runs_under_hypervisor("flags\t\t: fpu tsc lahf_lm\n"));
        assert!(!runs_under_hypervisor("model name\t: hypervisor\n"));
    }

    #[test]
    fn reads_this_machine() {
        let m = machine();
        assert!(!m.kernel_release.is_empty());
        assert!(m.environment.contains_key("clocksource"));
        let snap = IrqSnapshot::take();
        assert!(!snap.interrupts.is_empty());
        // Linux's USER_HZ is 100 on every architecture this project builds for.
        assert_eq!(user_hz(), Some(100));
    }
}
