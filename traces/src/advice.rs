//! Tuning advice per source (`jitter-trace advice`): what an administrator can change so that
//! the sources of an attributed trace leave the measured CPUs, from rules kept in one table
//! ([`RULES`]), each citing the kernel documentation it rests on.
//!
//! | rule | sources | advice | already set when | kernel documentation |
//! |---|---|---|---|---|
//! | tick | `timer`, `softirq:TIMER`, `softirq:HRTIMER` | `nohz_full=<cpus>` (CONFIG_NO_HZ_FULL, one runnable task per CPU, a housekeeping CPU outside the set) | `nohz_full` covers the CPUs | Documentation/timers/no_hz.rst; admin-guide/kernel-parameters.txt (nohz_full) |
//! | rcu | `softirq:RCU`, `task:rcu…` | `rcu_nocbs=<cpus>` (callbacks on rcuo kthreads elsewhere) | `rcu_nocbs` or `nohz_full` covers them | admin-guide/kernel-parameters.txt (rcu_nocbs); admin-guide/kernel-per-CPU-kthreads.rst |
//! | workqueue | `work:…`, `task:kworker/…` | unbound workqueues off the CPUs: `/sys/devices/virtual/workqueue/cpumask` (or `workqueue.unbound_cpus=`) | `workqueue.unbound_cpus` excludes them | Documentation/core-api/workqueue.rst |
//! | irq | `irq:…`, block/net softirqs and tasklets | `irqaffinity=<housekeeping>`, `/proc/irq/*/smp_affinity` | `irqaffinity` excludes them | Documentation/core-api/irq/irq-affinity.rst; kernel-parameters.txt (irqaffinity) |
//! | ipi | `ipi:…`, `irq_work` | `isolcpus=domain,managed_irq,<cpus>`, no threads of other processes there | `isolcpus` covers them | admin-guide/kernel-per-CPU-kthreads.rst; kernel-parameters.txt (isolcpus) |
//! | task | other `task:<name>` | move it off (`taskset -p`, a cpuset) or stop it | never: a task seen there runs there | admin-guide/cgroup-v2.rst (cpuset); kernel-parameters.txt (isolcpus) |
//! | page fault | `page_fault` | `transparent_hugepage=never` (THP compaction and khugepaged), or prefault memory | `transparent_hugepage=never` | admin-guide/mm/transhuge.rst |
//! | governor | any noise, governor not `performance` | `performance` governor (`cpupower frequency-set -g performance`) | governor `performance`, or no cpufreq | admin-guide/pm/cpufreq.rst |
//! | hypervisor | `unattributed` on a VM | dedicated host or pinned vCPUs (the guest cannot see this time) | not a VM | none: the host's configuration |
//!
//! Each hint says what the node has now, from the trace's configuration snapshot (kernel
//! command line, the collector's `environment`: isolated CPUs, `nohz_full`, `rcu_nocbs`,
//! `irqaffinity`, governor, virtualization). A rule whose setting the node already has for the
//! measured CPUs gives no advice; it is listed as already set.

use serde::Serialize;

use crate::attribution::{Report, UNATTRIBUTED};
use crate::model::Header;

/// The configuration of the node as the trace's header recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// The measured CPUs (the trace's streams).
    pub cpus: Vec<u32>,
    /// The kernel command line.
    pub cmdline: String,
    /// cpufreq governor(s), as the collector recorded them; `None` when not recorded.
    pub governor: Option<String>,
    /// Whether the collector saw a hypervisor.
    pub virtual_machine: bool,
}

impl NodeConfig {
    /// The configuration recorded in a trace header.
    pub fn of_header(h: &Header) -> NodeConfig {
        NodeConfig {
            cpus: h.stream_cpus.clone(),
            cmdline: h.kernel_cmdline.clone(),
            governor: h.environment.get("governor").cloned(),
            virtual_machine: h.environment.get("virtualization").map(String::as_str)
                == Some("hypervisor"),
        }
    }

    /// The value of `key=` on the kernel command line (the last one, as the kernel takes it).
    pub fn param(&self, key: &str) -> Option<&str> {
        (self.cmdline.split_whitespace())
            .filter_map(|w| w.split_once('='))
            .filter(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .next_back()
    }

    /// The CPUs a parameter's CPU list names (flags such as `nohz,domain,` skipped).
    pub(crate) fn param_cpus(&self, key: &str) -> Option<Vec<u32>> {
        self.param(key).map(cpu_list)
    }

    /// Whether `key`'s CPU list covers every measured CPU.
    fn covers(&self, key: &str) -> bool {
        self.param_cpus(key)
            .is_some_and(|c| !self.cpus.is_empty() && self.cpus.iter().all(|x| c.contains(x)))
    }

    /// Whether `key`'s CPU list names none of the measured CPUs.
    fn excludes(&self, key: &str) -> bool {
        self.param_cpus(key)
            .is_some_and(|c| !c.is_empty() && self.cpus.iter().all(|x| !c.contains(x)))
    }

    /// `key=value` as the node has it, or `key not set`.
    fn has(&self, key: &str) -> String {
        self.param(key)
            .map_or_else(|| format!("{key} not set"), |v| format!("{key}={v}"))
    }

    /// The measured CPUs as a kernel CPU list.
    fn cpus_text(&self) -> String {
        let v: Vec<String> = self.cpus.iter().map(u32::to_string).collect();
        v.join(",")
    }
}

/// The CPUs of a kernel CPU list (`2-3,5`; words that are not CPUs, such as isolcpus' flags,
/// are skipped).
pub(crate) fn cpu_list(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in text.split(',') {
        // Group syntax (`0-7:2/4`) is left out: read as nothing, the rule advises.
        if part.contains([':', '/']) {
            continue;
        }
        let range = part;
        match range.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                    out.extend(a..=b.min(a.saturating_add(4096)));
                }
            }
            None => out.extend(range.trim().parse::<u32>().ok()),
        }
    }
    out
}

/// One rule of the table.
pub(crate) struct Rule {
    /// Short name.
    pub name: &'static str,
    /// Whether a source label is this rule's.
    pub matches: fn(&str) -> bool,
    /// What the node has now, and whether that already is the advice.
    pub state: fn(&NodeConfig) -> (String, bool),
    /// The advice for the measured CPUs.
    pub advice: fn(&NodeConfig) -> String,
    /// The kernel documentation the rule rests on.
    pub doc: &'static str,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("name", &self.name)
            .field("doc", &self.doc)
            .finish_non_exhaustive()
    }
}

fn kind(label: &str) -> &str {
    label.split_once(':').map_or(label, |(k, _)| k)
}

fn is_kworker(label: &str) -> bool {
    label.starts_with("work:") || label.starts_with("task:kworker/")
}

fn is_rcu(label: &str) -> bool {
    label == "softirq:RCU" || label.starts_with("task:rcu")
}

/// The rules, in the order hints are listed.
pub(crate) const RULES: [Rule; 9] = [
    Rule {
        name: "tick",
        matches: |l| matches!(l, "timer" | "softirq:TIMER" | "softirq:HRTIMER"),
        state: |c| (c.has("nohz_full"), c.covers("nohz_full")),
        advice: |c| {
            format!(
                "nohz_full={} (kernel built with CONFIG_NO_HZ_FULL; the tick stops only while \
                 one task runs on the CPU; keep a housekeeping CPU outside the set)",
                c.cpus_text()
            )
        },
        doc: "Documentation/timers/no_hz.rst; Documentation/admin-guide/kernel-parameters.txt \
              (nohz_full)",
    },
    Rule {
        name: "rcu",
        matches: is_rcu,
        state: |c| {
            let set = c.covers("rcu_nocbs") || c.covers("nohz_full");
            (
                format!("{}, {}", c.has("rcu_nocbs"), c.has("nohz_full")),
                set,
            )
        },
        advice: |c| {
            format!(
                "rcu_nocbs={} (RCU callbacks run on rcuo kthreads, which can be moved off)",
                c.cpus_text()
            )
        },
        doc: "Documentation/admin-guide/kernel-parameters.txt (rcu_nocbs); \
              Documentation/admin-guide/kernel-per-CPU-kthreads.rst",
    },
    Rule {
        name: "workqueue",
        matches: is_kworker,
        state: |c| {
            let key = "workqueue.unbound_cpus";
            (c.has(key), c.excludes(key))
        },
        advice: |c| {
            format!(
                "keep unbound work items off CPUs {}: write a mask without them to \
                 /sys/devices/virtual/workqueue/cpumask (or boot with workqueue.unbound_cpus=); \
                 per-CPU (bound) work items stay and need their cause removed",
                c.cpus_text()
            )
        },
        doc: "Documentation/core-api/workqueue.rst",
    },
    Rule {
        name: "irq",
        matches: |l| {
            kind(l) == "irq"
                || (kind(l) == "softirq"
                    && !matches!(l, "softirq:TIMER" | "softirq:HRTIMER" | "softirq:RCU")
                    && l != "softirq:SCHED")
        },
        state: |c| (c.has("irqaffinity"), c.excludes("irqaffinity")),
        advice: |c| {
            format!(
                "steer device interrupts away from CPUs {}: irqaffinity=<housekeeping CPUs> at \
                 boot, /proc/irq/<n>/smp_affinity at run time (and stop irqbalance from undoing it)",
                c.cpus_text()
            )
        },
        doc: "Documentation/core-api/irq/irq-affinity.rst; \
              Documentation/admin-guide/kernel-parameters.txt (irqaffinity)",
    },
    Rule {
        name: "ipi",
        matches: |l| matches!(kind(l), "ipi" | "irq_work"),
        state: |c| (c.has("isolcpus"), c.covers("isolcpus")),
        advice: |c| {
            format!(
                "isolcpus=domain,managed_irq,{} and no threads of other processes on them (IPIs \
                 follow the work of processes sharing memory with the CPU's task)",
                c.cpus_text()
            )
        },
        doc: "Documentation/admin-guide/kernel-per-CPU-kthreads.rst; \
              Documentation/admin-guide/kernel-parameters.txt (isolcpus)",
    },
    Rule {
        name: "task",
        matches: |l| kind(l) == "task" && !is_kworker(l) && !is_rcu(l),
        state: |c| (c.has("isolcpus"), false),
        advice: |c| {
            format!(
                "move the task off CPUs {} (taskset -p <mask> <pid>, or a cpuset cgroup without \
                 them) or stop it",
                c.cpus_text()
            )
        },
        doc: "Documentation/admin-guide/cgroup-v2.rst (cpuset); \
              Documentation/admin-guide/kernel-parameters.txt (isolcpus)",
    },
    Rule {
        name: "page fault",
        matches: |l| kind(l) == "page_fault",
        state: |c| {
            let v = c.param("transparent_hugepage");
            (c.has("transparent_hugepage"), v == Some("never"))
        },
        advice: |_| {
            "transparent_hugepage=never (or madvise) to stop THP faults, compaction and \
             khugepaged; prefault and lock the application's memory"
                .into()
        },
        doc: "Documentation/admin-guide/mm/transhuge.rst",
    },
    Rule {
        name: "governor",
        // Takes no source of its own: it speaks when the trace has any noise.
        matches: |_| false,
        state: |c| match &c.governor {
            None => ("governor not recorded".into(), true),
            Some(g) => (
                format!("governor {g}"),
                g == "performance" || g.starts_with("none"),
            ),
        },
        advice: |_| "the performance governor (cpupower frequency-set -g performance)".into(),
        doc: "Documentation/admin-guide/pm/cpufreq.rst",
    },
    Rule {
        name: "hypervisor",
        matches: |l| l == UNATTRIBUTED,
        state: |c| {
            let vm = if c.virtual_machine {
                "a virtual machine"
            } else {
                "no hypervisor seen"
            };
            (vm.into(), !c.virtual_machine)
        },
        advice: |_| {
            "time no kernel event explains is the hypervisor's on a VM: a dedicated host, or \
             vCPUs pinned to host CPUs kept free of other guests and host work"
                .into()
        },
        doc: "none in the guest kernel: the host's configuration",
    },
];

/// What one rule says about a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hint {
    /// The rule.
    pub rule: &'static str,
    /// The trace's sources the rule covers, largest first.
    pub sources: Vec<String>,
    /// Their share of the noise time together.
    pub share: f64,
    /// What the node has now.
    pub node_has: String,
    /// The advice; `None` when the node already has it.
    pub advice: Option<String>,
    /// The kernel documentation the rule rests on.
    pub doc: &'static str,
}

/// The hints for the sources of `report` (frequency mode) on a node configured as `config`:
/// one per rule that covers a source with at least `min_share` of the noise time. A source
/// goes to the first rule that matches it (the governor rule takes no source of its own; it
/// speaks when the trace has any noise).
pub fn advise(report: &Report, config: &NodeConfig, min_share: f64) -> Vec<Hint> {
    let mut hints = Vec::new();
    for (i, rule) in RULES.iter().enumerate() {
        let mine: Vec<(&str, f64)> = (report.rows.iter())
            .filter(|s| s.share >= min_share)
            .filter(|s| (rule.matches)(&s.source))
            .filter(|s| !RULES[..i].iter().any(|r| (r.matches)(&s.source)))
            .map(|s| (s.source.as_str(), s.share))
            .collect();
        if mine.is_empty() && !(rule.name == "governor" && report.noise_ns > 0) {
            continue;
        }
        let (node_has, set) = (rule.state)(config);
        hints.push(Hint {
            rule: rule.name,
            sources: mine.iter().map(|m| m.0.to_string()).collect(),
            share: mine.iter().map(|m| m.1).sum(),
            node_has,
            advice: (!set).then(|| (rule.advice)(config)),
            doc: rule.doc,
        });
    }
    hints
}

/// The hints as text: one block per rule, the ones already set last.
pub fn render(hints: &[Hint]) -> String {
    let mut out = String::new();
    for h in hints.iter().filter(|h| h.advice.is_some()) {
        let what = if h.sources.is_empty() {
            "all noise".to_string()
        } else {
            format!(
                "{} ({:.1} % of noise time)",
                h.sources.join(", "),
                h.share * 100.0
            )
        };
        out.push_str(&format!(
            "{}: {what}\n  node has: {}\n  advice: {}\n  see: {}\n",
            h.rule,
            h.node_has,
            h.advice.as_deref().unwrap_or_default(),
            h.doc
        ));
    }
    for h in hints.iter().filter(|h| h.advice.is_none()) {
        out.push_str(&format!("{}: already set ({})\n", h.rule, h.node_has));
    }
    if hints.is_empty() {
        out.push_str("no source above the share asked for: nothing to advise\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::{Category, Mode, SourceRow};

    fn report(sources: &[(&str, f64)]) -> Report {
        let rows = (sources.iter())
            .map(|&(source, share)| SourceRow {
                source: source.into(),
                category: Category::of(source),
                count: 10,
                rate_per_s: 1.0,
                min_ns: 1,
                mean_ns: 1.0,
                median_ns: 1,
                max_ns: 1,
                total_ns: (share * 1e6) as u64,
                share,
                period_ns: None,
                periods: None,
                median_gap_ns: None,
            })
            .collect();
        Report {
            mode: Mode::Frequency,
            detours: 10,
            noise_ns: 1_000_000,
            explained: 0.5,
            events_lost: 0,
            window_ns: 1_000_000_000,
            entries_checked: 0,
            entries_outside: 0,
            rows,
            combinations: Vec::new(),
            steal: Vec::new(),
            notes: Default::default(),
        }
    }

    fn node(cmdline: &str, governor: &str, vm: bool) -> NodeConfig {
        NodeConfig {
            cpus: vec![2, 3],
            cmdline: cmdline.into(),
            governor: Some(governor.into()),
            virtual_machine: vm,
        }
    }

    fn hint<'a>(h: &'a [Hint], rule: &str) -> Option<&'a Hint> {
        h.iter().find(|x| x.rule == rule)
    }

    /// Per rule: a trace with its source gets its advice on a bare node, and no advice on a
    /// node configured for the measured CPUs (2, 3); a setting that leaves a CPU out is not
    /// enough.
    #[test]
    fn each_rule_advises_its_source_unless_the_node_has_it() {
        let cases: [(&str, &str, &str, &str); 8] = [
            ("timer", "tick", "nohz_full=2-3", "nohz_full=2,3"),
            ("softirq:RCU", "rcu", "rcu_nocbs=1-3", "rcu_nocbs=2,3"),
            (
                "task:kworker/2:1",
                "workqueue",
                "workqueue.unbound_cpus=0-1",
                "unbound_cpus",
            ),
            (
                "irq:virtio0",
                "irq",
                "irqaffinity=0-1",
                "irqaffinity=<housekeeping",
            ),
            (
                "ipi:call_function",
                "ipi",
                "isolcpus=domain,managed_irq,2-3",
                "isolcpus=",
            ),
            (
                "page_fault",
                "page fault",
                "transparent_hugepage=never",
                "never",
            ),
            ("unattributed", "hypervisor", "", "dedicated host"),
            ("task:daemon", "task", "", "taskset"),
        ];
        for (source, rule, configured, says) in cases {
            let r = report(&[(source, 0.5)]);
            let bare = advise(&r, &node("ro quiet", "performance", true), 0.01);
            let h = hint(&bare, rule).unwrap_or_else(|| panic!("{source}: {bare:?}"));
            assert_eq!(h.sources, vec![source.to_string()]);
            let a = h
                .advice
                .as_deref()
                .unwrap_or_else(|| panic!("{source}: {h:?}"));
            assert!(a.contains(says), "{source}: {a}");
            assert!(h.doc.contains("Documentation/") || rule == "hypervisor");
            // Exactly one rule takes the source.
            assert_eq!(bare.iter().filter(|x| !x.sources.is_empty()).count(), 1);
            if rule == "task" {
                continue; // a task seen on the CPU runs there whatever the node has
            }
            let vm = rule != "hypervisor";
            let set = advise(
                &r,
                &node(&format!("ro {configured}"), "performance", vm),
                0.01,
            );
            let h = hint(&set, rule).unwrap();
            assert_eq!(h.advice, None, "{source}: {h:?}");
            assert!(render(&set).contains(&format!("{rule}: already set")));
        }
        // nohz_full on CPU 2 only still advises for CPUs 2 and 3.
        let r = report(&[("timer", 0.5)]);
        let half = advise(&r, &node("nohz_full=2", "performance", false), 0.01);
        let h = hint(&half, "tick").unwrap();
        assert_eq!(h.node_has, "nohz_full=2");
        assert!(h.advice.as_deref().unwrap().starts_with("nohz_full=2,3"));
        // nohz_full offloads RCU callbacks too.
        let r = report(&[("softirq:RCU", 0.5)]);
        let h = advise(&r, &node("nohz_full=2-3", "performance", false), 0.01);
        assert_eq!(hint(&h, "rcu").unwrap().advice, None);
    }

    #[test]
    fn the_governor_speaks_unless_performance_and_small_sources_are_left_out() {
        let r = report(&[("timer", 0.005), ("task:x", 0.9)]);
        let h = advise(&r, &node("", "schedutil", false), 0.01);
        assert!(hint(&h, "tick").is_none());
        let g = hint(&h, "governor").unwrap();
        assert_eq!(g.node_has, "governor schedutil");
        assert!(g.advice.as_deref().unwrap().contains("performance"));
        let h = advise(&r, &node("", "performance", false), 0.01);
        assert_eq!(hint(&h, "governor").unwrap().advice, None);
        let text = render(&h);
        assert!(
            text.starts_with("task: task:x (90.0 % of noise time)"),
            "{text}"
        );
    }

    #[test]
    fn cpu_lists_and_parameters_are_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list("0-2,5"), vec![0, 1, 2, 5]);
        assert_eq!(cpu_list("nohz,domain,2-3"), vec![2, 3]);
        assert!(cpu_list("1-7:2/4").is_empty());
        let c = node("a=1 nohz_full=1 b nohz_full=2-3", "x", false);
        assert_eq!(c.param("nohz_full"), Some("2-3"));
        assert!(c.covers("nohz_full") && !c.excludes("nohz_full"));
        assert_eq!(c.has("rcu_nocbs"), "rcu_nocbs not set");
    }
}
