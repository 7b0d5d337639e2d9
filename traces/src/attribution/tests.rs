//! Tests of the per-source tables.

use super::*;
use crate::changes::{diff, render_diff, Change};

fn detour(start: u64, run: u64, parts: &[(&str, u64, u64)]) -> AttributedDetour {
    let explained = parts.iter().map(|p| p.2).sum();
    AttributedDetour {
        start_ns: start,
        run_ns: run,
        source: parts.first().map_or(UNATTRIBUTED.into(), |p| p.0.into()),
        combination: parts.iter().map(|p| p.0).collect::<Vec<_>>().join("+"),
        explained_ns: explained,
        parts: parts
            .iter()
            .map(|&(s, at, ns)| Part {
                source: s.into(),
                start_ns: at,
                ns,
            })
            .collect(),
    }
}

#[test]
fn categories_follow_paper_002() {
    assert_eq!(Category::of("timer"), Category::Periodic);
    assert_eq!(Category::of("softirq:TIMER"), Category::Periodic);
    assert_eq!(Category::of("softirq:RCU"), Category::Scheduling);
    assert_eq!(Category::of("softirq:NET_RX"), Category::Io);
    assert_eq!(Category::of("sched"), Category::Scheduling);
    assert_eq!(Category::of("idle"), Category::Scheduling);
    assert_eq!(Category::of("task:kworker/0:1"), Category::Preemption);
    assert_eq!(Category::of("irq:virtio0"), Category::Io);
    assert_eq!(Category::of("ipi:reschedule"), Category::Ipi);
    assert_eq!(Category::of("page_fault:user"), Category::PageFault);
    assert_eq!(Category::of(UNATTRIBUTED), Category::Unattributed);
}

#[test]
fn the_table_counts_rates_periods_and_shares_exactly() {
    // One CPU, 1 s: a timer every 4 ms (3 of them), one daemon detour with a residual.
    let a = Attribution {
        version: ATTRIBUTION_VERSION,
        cpus: vec![CpuAttribution {
            cpu: 0,
            begin_ns: 0,
            end_ns: 1_000_000_000,
            detours: vec![
                detour(1_000_000, 2_000, &[("timer", 1_000_000, 1_500)]),
                detour(5_000_000, 3_000, &[("timer", 5_000_000, 2_500)]),
                detour(9_000_000, 1_000, &[("timer", 9_000_000, 1_000)]),
                detour(
                    20_000_000,
                    304_000,
                    &[
                        ("timer", 20_000_000, 2_000),
                        ("task:d", 20_002_000, 300_000),
                    ],
                ),
            ],
            ..CpuAttribution::default()
        }],
        ..Attribution::default()
    };
    let r = report(&a);
    assert_eq!(r.detours, 4);
    assert_eq!(r.noise_ns, 310_000);
    let explained = 1_500 + 2_500 + 1_000 + 302_000;
    assert!((r.explained - explained as f64 / 310_000.0).abs() < 1e-12);
    let names: Vec<&str> = r.rows.iter().map(|r| r.source.as_str()).collect();
    assert_eq!(names, ["task:d", "timer", UNATTRIBUTED]);
    let t = &r.rows[1];
    assert_eq!(
        (t.count, t.min_ns, t.max_ns, t.total_ns),
        (4, 1_000, 2_500, 7_000)
    );
    assert_eq!(t.median_ns, 2_000);
    assert!((t.rate_per_s - 4.0).abs() < 1e-12);
    // Gaps 4, 4, 11 ms: the median is 4 ms; the periods are not analysed by `report`.
    assert_eq!(t.median_gap_ns, Some(4_000_000));
    assert_eq!((t.period_ns, &t.periods), (None, &None));
    // Four occurrences are too few for a period: analysed, none found.
    #[cfg(feature = "periodogram")]
    {
        let p = report_with_periods(&a, Mode::Frequency);
        assert_eq!(
            (p.rows[1].period_ns, &p.rows[1].periods),
            (None, &Some(vec![]))
        );
        let text = render(&p);
        assert!(
            text.lines().nth(1).unwrap().ends_with("period_ms"),
            "{text}"
        );
        assert!(!text.contains("is not computed here"), "{text}");
    }
    let u = &r.rows[2];
    assert_eq!((u.count, u.total_ns), (3, 500 + 500 + 2_000));
    assert_eq!(r.rows[0].median_gap_ns, None);
    let shares: f64 = r.rows.iter().map(|r| r.share).sum();
    assert!((shares - 1.0).abs() < 1e-12, "shares add up to {shares}");
    let combos: Vec<(&str, u64, u64)> = r
        .combinations
        .iter()
        .map(|c| (c.combination.as_str(), c.count, c.total_ns))
        .collect();
    assert_eq!(combos, [("timer+task:d", 1, 304_000), ("timer", 3, 6_000)]);
    assert_eq!(r.combinations[1].median_ns, 2_000);
    let text = render(&r);
    assert!(text.contains("99.0 % explained"), "{text}");
    // Without the periodogram: no period column, and a line saying where the periods are.
    assert!(text.lines().nth(1).unwrap().ends_with("share%"), "{text}");
    assert!(
        text.contains("# periods of each source: jitter-trace attribution <trace>"),
        "{text}"
    );
    assert!(text
        .lines()
        .nth(2)
        .unwrap()
        .starts_with("task:d        preemption"));
    // The combinations: a commented table, largest detour time first.
    let combos: Vec<&str> = text.lines().filter(|l| l.starts_with("#   ")).collect();
    assert_eq!(combos.len(), 3, "{text}");
    assert!(
        combos[0].ends_with("share  detours  median_us  combination"),
        "{text}"
    );
    assert_eq!(
        combos[1], "#   98.06 %        1     304.00  timer+task:d",
        "{text}"
    );
}

/// 2 s on one CPU: a timer every 4 ms (2 µs, 1 µs unexplained each), a daemon every 10 ms
/// (300 µs), every third daemon wake-up joined by the timer.
fn periodic_attribution() -> Attribution {
    let mut detours = Vec::new();
    for k in 0..500u64 {
        let t = 1_000_000 + k * 4_000_000;
        detours.push(detour(t, 3_000, &[("timer", t, 2_000)]));
    }
    for k in 0..200u64 {
        let t = 2_500_000 + k * 10_000_000;
        if k % 3 == 0 {
            detours.push(detour(
                t,
                302_000,
                &[("timer", t, 2_000), ("task:d1", t + 2_000, 300_000)],
            ));
        } else {
            detours.push(detour(t, 300_000, &[("task:d1", t, 300_000)]));
        }
    }
    detours.sort_by_key(|d| d.start_ns);
    Attribution {
        version: ATTRIBUTION_VERSION,
        cpus: vec![CpuAttribution {
            cpu: 0,
            begin_ns: 0,
            end_ns: 2_000_000_000,
            detours,
            ..CpuAttribution::default()
        }],
        ..Attribution::default()
    }
}

/// The period is within half a frequency bin of `p`: at most p²/(2·span) for the 2 s span.
fn assert_within_half_bin(row: &SourceRow, p: f64) {
    let got = row.period_ns.expect("a period") as f64;
    assert!((got - p).abs() <= p * p / 4e9, "{row:?}");
}

#[cfg(feature = "periodogram")]
#[test]
fn rows_carry_the_periodogram_period_of_each_source() {
    let r = report_with_periods(&periodic_attribution(), Mode::Frequency);
    let row = |s: &str| r.rows.iter().find(|r| r.source == s).unwrap();
    assert_within_half_bin(row("task:d1"), 10e6);
    // The timer: every 4 ms, plus every 30 ms with the daemon; the 4 ms family dominates.
    assert_within_half_bin(row("timer"), 4e6);
    assert_within_half_bin(row(UNATTRIBUTED), 4e6);
    let text = render(&r);
    let d1 = text.lines().find(|l| l.starts_with("task:d1")).unwrap();
    assert!(d1.ends_with("10.000"), "{text}");
}

#[cfg(feature = "periodogram")]
#[test]
fn time_mode_makes_each_combination_a_source_with_whole_run_times() {
    let a = periodic_attribution();
    let r = report_with_periods(&a, Mode::Time);
    assert_eq!(r.mode, Mode::Time);
    let names: Vec<&str> = r.rows.iter().map(|r| r.source.as_str()).collect();
    assert_eq!(names, ["task:d1", "timer+task:d1", "timer"]);
    let combo = &r.rows[1];
    assert_eq!((combo.count, combo.total_ns), (67, 67 * 302_000));
    assert_eq!(combo.category, Category::Periodic);
    assert_within_half_bin(combo, 30e6);
    let timer = &r.rows[2];
    assert_eq!((timer.count, timer.min_ns), (500, 3_000));
    let shares: f64 = r.rows.iter().map(|r| r.share).sum();
    assert!((shares - 1.0).abs() < 1e-12);
    // Frequency mode splits the same time over the members and the residual.
    let f = report_in(&a, Mode::Frequency);
    let total = |r: &Report| r.rows.iter().map(|r| r.total_ns).sum::<u64>();
    assert_eq!(total(&f), total(&r));
    assert_eq!(f.rows.len(), 3);
    assert!(render(&r).contains("time domain"));
    assert_eq!("time".parse::<Mode>().unwrap(), Mode::Time);
    assert!("space".parse::<Mode>().is_err());
}

#[cfg(feature = "periodogram")]
#[test]
fn diff_names_new_vanished_and_changed_sources_by_its_criterion() {
    let base = periodic_attribution();
    let report = |a: &Attribution| report_with_periods(a, Mode::Frequency);
    let same = diff(&report(&base), &report(&base));
    assert!(same.sources.iter().all(|s| s.change == Change::Same));
    assert!(render_diff(&same).contains("# 3 sources within the criterion"));
    // The new run: the daemon d1 is gone, d2 (50 µs every 5 ms) and one rare work item came.
    let mut new = base.clone();
    let c = &mut new.cpus[0];
    c.detours.retain(|d| !d.combination.contains("task:d1"));
    for k in 0..400u64 {
        let t = 3_000_000 + k * 5_000_000;
        c.detours.push(detour(t, 50_000, &[("task:d2", t, 50_000)]));
    }
    c.detours
        .push(detour(7_000_000, 9_000, &[("work:rare", 7_000_000, 9_000)]));
    c.detours.sort_by_key(|d| d.start_ns);
    let d = diff(&report(&base), &report(&new));
    let get = |s: &str| d.sources.iter().find(|c| c.source == s).unwrap();
    assert_eq!(get("task:d1").change, Change::Vanished);
    let d2 = get("task:d2");
    assert_eq!(
        (d2.change, d2.count_base, d2.count_new),
        (Change::New, 0, 400)
    );
    // Within half a frequency bin, p²/(2·span) = 6.25 µs.
    assert!(
        d2.period_new_ns.unwrap().abs_diff(5_000_000) <= 6_250,
        "{d2:?}"
    );
    // Once in 2 s: absent from the base run is no evidence (expected 1 < 3 there).
    assert_eq!(get("work:rare").change, Change::Same);
    // The timer kept its own 500 but lost the 67 it shared with d1: z = -2.05, the same
    // rate by the criterion; its share of the now smaller noise grew from 1.8 % to 4.7 %.
    let timer = get("timer");
    assert!((timer.rate_z + 2.05).abs() < 0.01, "{timer:?}");
    assert_eq!(timer.change, Change::Changed);
    let order: Vec<Change> = d.sources.iter().map(|s| s.change).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);
    let text = render_diff(&d);
    assert!(text.contains("task:d2") && text.contains("new"), "{text}");
    assert!(
        text.contains("gives >= 3 occurrences there; changed: rate |z| >= 3 and >= 20 % apart"),
        "{text}"
    );
    assert!(!text.contains("work:rare"), "{text}");
}

#[test]
fn a_bucket_keeps_its_detours_and_the_csv_has_one_row_per_source() {
    let a = periodic_attribution();
    // 2-3.5 µs: the timer detours alone (3 µs), not the daemon's (300-302 µs).
    let b = report(&within_runs(&a, 2_000, 3_500));
    let names: Vec<&str> = b.rows.iter().map(|r| r.source.as_str()).collect();
    assert_eq!(names, ["timer", UNATTRIBUTED]);
    assert_eq!(b.detours, 500);
    assert!((b.rows[0].share - 2.0 / 3.0).abs() < 1e-12);
    let r = report(&a);
    let text = csv(&r);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + r.rows.len());
    assert!(lines[0].starts_with("source,category,count,"));
    let d1 = lines.iter().find(|l| l.starts_with("task:d1,")).unwrap();
    assert_eq!(d1.split(',').count(), 13, "{d1}");
    assert!(
        d1.starts_with("task:d1,preemption,200,100.000,300000,"),
        "{d1}"
    );
    // A label with a comma and quotes is quoted and reads back whole.
    let mut q = r.clone();
    q.rows[0].source = "say \"x\", then y".into();
    let text = csv(&q);
    let mut back = csv::Reader::from_reader(text.as_bytes());
    let first = back.records().next().unwrap().unwrap();
    assert_eq!((&first[0], first.len()), ("say \"x\", then y", 13));
    assert!(text.contains("\"say \"\"x\"\", then y\","), "{text}");
}

#[test]
fn the_sidecar_round_trips_and_refuses_other_versions() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jtr");
    let p = sidecar_path(&trace);
    assert!(p.to_string_lossy().ends_with("t.jtr.attr.json"));
    let mut a = Attribution {
        version: ATTRIBUTION_VERSION,
        trace_clock: "x86-tsc".into(),
        ..Attribution::default()
    };
    a.write(&p).unwrap();
    assert_eq!(Attribution::read(&p).unwrap(), a);
    a.version = 99;
    a.write(&p).unwrap();
    assert!(Attribution::read(&p)
        .unwrap_err()
        .to_string()
        .contains("version 99"));
    std::fs::write(&p, b"{").unwrap();
    assert!(Attribution::read(&p).is_err());
}

#[test]
fn a_sidecar_written_before_steal_was_recorded_reads_as_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("old.jtr.attr.json");
    let a = Attribution {
        version: ATTRIBUTION_VERSION,
        cpus: vec![CpuAttribution {
            cpu: 2,
            end_ns: 1_000_000_000,
            ..CpuAttribution::default()
        }],
        ..Attribution::default()
    };
    let mut v = serde_json::to_value(&a).unwrap();
    let cpu = v["cpus"][0].as_object_mut().unwrap();
    assert!(cpu.remove("steal").is_some());
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    let back = Attribution::read(&p).unwrap();
    assert_eq!(back.cpus[0].steal, None);
    let text = render(&report(&back));
    assert!(text.contains("# steal: steal time not recorded"), "{text}");
}

use crate::periodogram::{periods, Occurrences};

/// The per-source table as it was built before the passes (every time, start and run-time
/// of the attribution in memory, sorted): the oracle of [`report_of`].
fn naive_report_in(a: &Attribution, mode: Mode) -> Report {
    struct Acc {
        times: Vec<u64>,
        starts: BTreeMap<u32, Vec<u64>>,
    }
    let mut by: BTreeMap<String, Acc> = BTreeMap::new();
    let mut combos: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut noise_ns = 0u64;
    let mut explained = 0u64;
    let mut detours = 0u64;
    let mut window_ns = 0u64;
    for c in &a.cpus {
        window_ns += c.end_ns.saturating_sub(c.begin_ns);
        for d in &c.detours {
            detours += 1;
            noise_ns += d.run_ns;
            combos.entry(&d.combination).or_default().push(d.run_ns);
            explained += d.explained_ns.min(d.run_ns);
            for (source, start, ns) in mode.shares(d) {
                let acc = by.entry(source.to_string()).or_insert_with(|| Acc {
                    times: Vec::new(),
                    starts: BTreeMap::new(),
                });
                acc.times.push(ns);
                acc.starts.entry(c.cpu).or_default().push(start);
            }
        }
    }
    let secs = window_ns as f64 / 1e9;
    let mut rows: Vec<SourceRow> = by
        .into_iter()
        .map(|(source, mut acc)| {
            acc.times.sort_unstable();
            let total: u64 = acc.times.iter().sum();
            let n = acc.times.len() as u64;
            let mut gaps: Vec<u64> = acc
                .starts
                .values()
                .flat_map(|s| s.windows(2).map(|w| w[1].saturating_sub(w[0])))
                .collect();
            gaps.sort_unstable();
            SourceRow {
                category: match mode {
                    Mode::Frequency => Category::of(&source),
                    // A combination takes its first member's category.
                    Mode::Time => Category::of(source.split('+').next().unwrap_or_default()),
                },
                source,
                count: n,
                rate_per_s: if secs > 0.0 { n as f64 / secs } else { 0.0 },
                min_ns: acc.times.first().copied().unwrap_or(0),
                mean_ns: total as f64 / n.max(1) as f64,
                median_ns: acc.times.get(acc.times.len() / 2).copied().unwrap_or(0),
                max_ns: acc.times.last().copied().unwrap_or(0),
                total_ns: total,
                share: if noise_ns > 0 {
                    total as f64 / noise_ns as f64
                } else {
                    0.0
                },
                period_ns: None,
                periods: None,
                median_gap_ns: gaps.get(gaps.len() / 2).copied(),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.source.cmp(&b.source)));
    let mut combinations: Vec<CombinationRow> = combos
        .into_iter()
        .map(|(c, mut runs)| {
            runs.sort_unstable();
            let total: u64 = runs.iter().sum();
            CombinationRow {
                combination: c.to_string(),
                count: runs.len() as u64,
                median_ns: runs[runs.len() / 2],
                total_ns: total,
                share: if noise_ns > 0 {
                    total as f64 / noise_ns as f64
                } else {
                    0.0
                },
            }
        })
        .collect();
    combinations.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(a.combination.cmp(&b.combination))
    });
    combinations.truncate(TOP_COMBINATIONS);
    Report {
        mode,
        detours,
        noise_ns,
        explained: if noise_ns > 0 {
            explained as f64 / noise_ns as f64
        } else {
            0.0
        },
        events_lost: a.cpus.iter().map(|c| c.events_lost).sum(),
        window_ns,
        entries_checked: a.cpus.iter().map(|c| c.entries_checked).sum(),
        entries_outside: a.cpus.iter().map(|c| c.entries_outside).sum(),
        rows,
        combinations,
        steal: steal::comparisons(a),
        notes: a.notes.clone(),
    }
}

/// The periods as they were found before the passes: every occurrence time kept.
#[cfg(feature = "periodogram")]
fn naive_add_periods(report: &mut Report, a: &Attribution) {
    let mut starts: BTreeMap<&str, BTreeMap<u32, Vec<u64>>> = BTreeMap::new();
    for c in &a.cpus {
        for d in &c.detours {
            for (source, start, _) in report.mode.shares(d) {
                let by_cpu = starts.entry(source).or_default();
                by_cpu.entry(c.cpu).or_default().push(start);
            }
        }
    }
    let windows: BTreeMap<u32, (u64, u64)> = a
        .cpus
        .iter()
        .map(|c| (c.cpu, (c.begin_ns, c.end_ns)))
        .collect();
    for row in &mut report.rows {
        let occurrences: Vec<Occurrences> = starts
            .get(row.source.as_str())
            .into_iter()
            .flatten()
            .map(|(cpu, t)| {
                let (begin_ns, end_ns) = windows.get(cpu).copied().unwrap_or_default();
                Occurrences {
                    begin_ns,
                    end_ns,
                    times_ns: t,
                }
            })
            .collect();
        let found = periods(&occurrences);
        row.period_ns = found.first().map(|p| p.period_ns.round() as u64);
        row.periods = Some(found);
    }
}

/// A pseudo-random attribution: `cpus` entries (CPU numbers drawn from 0..cpus, so some
/// repeat), windows up to `window_ns`, detours of 0–3 parts among 6 sources with periodic
/// and random starts, some parts outside the window.
fn random_attribution(seed: u64, cpus: usize, window_ns: u64, per_cpu: u64) -> Attribution {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m.max(1)
    };
    let names = [
        "timer",
        "softirq:TIMER",
        "task:a",
        "irq:b",
        "ipi:c",
        "sched",
    ];
    let entries = (0..cpus)
        .map(|_| {
            let cpu = next(cpus as u64) as u32;
            let begin_ns = next(1_000_000);
            let end_ns = begin_ns + window_ns / 2 + next(window_ns / 2);
            let mut detours: Vec<AttributedDetour> = (0..per_cpu)
                .map(|i| {
                    let start = if i % 2 == 0 {
                        begin_ns + i * 2_000_000 % (end_ns - begin_ns)
                    } else {
                        begin_ns + next(end_ns - begin_ns + 5_000_000)
                    };
                    let run = 1 + next(if i % 7 == 0 { 50_000_000 } else { 5_000 });
                    let n = next(4) as usize;
                    let parts: Vec<(&str, u64, u64)> = (0..n)
                        .map(|k| (names[next(6) as usize], start + k as u64, next(run / 3 + 1)))
                        .collect();
                    detour(start, run, &parts)
                })
                .collect();
            detours.sort_by_key(|d| d.start_ns);
            CpuAttribution {
                cpu,
                begin_ns,
                end_ns,
                events_lost: next(3),
                entries_checked: per_cpu,
                entries_outside: next(2),
                steal: (next(2) == 0).then_some(Steal {
                    ticks: next(9),
                    tick_ns: 10_000_000,
                    window_ns: end_ns - begin_ns,
                }),
                detours,
                ..CpuAttribution::default()
            }
        })
        .collect();
    Attribution {
        version: ATTRIBUTION_VERSION,
        cpus: entries,
        notes: [("n".to_string(), seed.to_string())].into(),
        ..Attribution::default()
    }
}

#[cfg(feature = "periodogram")]
#[test]
fn the_passes_give_the_tables_of_every_value_sorted_to_the_bit() {
    // (seed, CPU entries, window, detours per entry): short windows; one of 60 s (3 segments
    // per CPU); 20 entries of 13.5–27 s (up to 40
    // segments, 16 kept).
    let cases = [
        (1, 1, 2_000_000_000, 3_000),
        (2, 4, 1_000_000_000, 800),
        (3, 2, 60_000_000_000, 2_000),
        (4, 20, 27_000_000_000, 300),
        (5, 3, 10_000, 50),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (seed, cpus, window, n) in cases {
        let a = random_attribution(seed, cpus, window, n);
        let file = dir.path().join(format!("{seed}.attr.json"));
        a.write(&file).unwrap();
        let file = crate::sidecar_reader::SidecarFile::new(&file);
        for mode in [Mode::Frequency, Mode::Time] {
            for runs in [None, Some((100, 3_000)), Some((10_000_000, 10_000_001))] {
                let bucket = runs.map_or(a.clone(), |(lo, hi)| within_runs(&a, lo, hi));
                let mut want = naive_report_in(&bucket, mode);
                let scope = Scope {
                    mode,
                    runs,
                    periods: None,
                };
                assert_eq!(
                    report_of(&a, scope).unwrap(),
                    want,
                    "{seed} {mode:?} {runs:?}"
                );
                // The long windows' periodograms (2^17–2^18 bins, up to 16 segments per source)
                // take minutes unoptimised: their segments and bins are compared with the
                // times' in `periodogram::segments`, their periods through the CLI in
                // docs/journal/2026-11-27-s6-sidecar.md.
                if window > 2_000_000_000 {
                    continue;
                }
                naive_add_periods(&mut want, &bucket);
                let scope = Scope {
                    periods: Some(crate::periodogram::periods_binned),
                    ..scope
                };
                assert_eq!(
                    report_of(&file, scope).unwrap(),
                    want,
                    "{seed} {mode:?} {runs:?}"
                );
                let samples = samples_of(&file, mode, runs).unwrap();
                assert_eq!(samples, samples_of(&bucket, mode, None).unwrap());
            }
        }
        // The even detours come every 2 ms: a period where the window holds enough of them.
        if window <= 2_000_000_000 && n >= 800 {
            let with = report_with_periods(&a, Mode::Frequency);
            assert!(with.rows.iter().any(|r| r.period_ns.is_some()), "{seed}");
        }
    }
}
