//! The machine configuration that explains the noise: kernel, command line, clocksource, HZ,
//! governor, and per-CPU interrupt, softirq and steal counts (snapshots and their deltas).

use std::collections::BTreeMap;
use std::fs;

/// Static facts about the machine, read once at collection start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Machine {
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
pub fn machine() -> Machine {
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
    let virt = if cpuinfo
        .lines()
        .any(|l| l.starts_with("flags") && l.contains(" hypervisor"))
    {
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

/// The value of `key=...` on a kernel command line (`Some("")` for a bare flag).
pub fn cmdline_value(cmdline: &str, key: &str) -> Option<String> {
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
pub struct IrqSnapshot {
    /// `/proc/interrupts`: line name → per-CPU counts (index = CPU id).
    pub interrupts: BTreeMap<String, Vec<u64>>,
    /// `/proc/softirqs`: kind → per-CPU counts.
    pub softirqs: BTreeMap<String, Vec<u64>>,
    /// `/proc/stat` steal time per CPU, in USER_HZ ticks.
    pub steal: BTreeMap<u32, u64>,
}

/// Parses a `/proc/interrupts`- or `/proc/softirqs`-style table into name → per-CPU counts.
pub fn parse_per_cpu_table(text: &str) -> BTreeMap<String, Vec<u64>> {
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
pub fn parse_steal(text: &str) -> BTreeMap<u32, u64> {
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
        }
    }

    /// Per-CPU deltas `later − self` for `cpus`, as notes: one JSON object per key
    /// (`interrupts`, `softirqs`, `steal_ticks`), each `{cpu: {name: delta}}` without zero entries.
    pub fn delta_notes(&self, later: &IrqSnapshot, cpus: &[u32]) -> BTreeMap<String, String> {
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
        notes
    }

    /// Total interrupts + softirqs of `cpu` between `self` and `later`.
    pub fn total_delta(&self, later: &IrqSnapshot, cpu: u32) -> (u64, u64) {
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
    fn reads_this_machine() {
        let m = machine();
        assert!(!m.kernel_release.is_empty());
        assert!(m.environment.contains_key("clocksource"));
        let snap = IrqSnapshot::take();
        assert!(!snap.interrupts.is_empty());
    }
}
