//! The `jitter-trace` binary: exit codes, one-line errors, and output of each command.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jitter-trace"))
}

fn run(dir: &Path, args: &[&str]) -> Output {
    bin().current_dir(dir).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails unless the command exits with 2 and prints exactly one line starting `error: `.
fn assert_error(o: &Output, needle: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("error: ") && e.contains(needle), "{e}");
    assert!(!e.contains("panicked") && !e.contains("backtrace"), "{e}");
}

fn synth(dir: &Path, name: &str) -> PathBuf {
    let o = run(
        dir,
        &[
            "synth",
            "periodic:period=1ms,dur=20us+poisson:rate=2000/s,dur=exp:3us",
            "--duration",
            "2s",
            "--streams",
            "2",
            "--seed",
            "3",
            "-o",
            name,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    dir.join(name)
}

#[test]
fn stats_json_matches_the_closed_form() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        dir.path(),
        &[
            "synth",
            "periodic:period=1ms,dur=10us",
            "--duration",
            "1s",
            "-o",
            "p.jtr",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(
        dir.path(),
        &[
            "--json",
            "stats",
            "p.jtr",
            "--overhead",
            "25us",
            "--share",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["stats"]["overall"];
    assert_eq!(s["count"], 1000);
    assert_eq!(s["noise_ratio"], 0.01);
    assert_eq!(s["median_ns"], 10_000);
    // O = 25 us, d = 10 us: S must exceed 2.5, so integer 3.
    assert_eq!(v["scale_for_share"]["integer"], 3);
    let o = run(dir.path(), &["stats", "p.jtr"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("detours") && text.contains("cpu0"), "{text}");
}

#[test]
fn every_command_runs_on_a_synthetic_trace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    synth(d, "a.jtr");
    let ok = |args: &[&str]| {
        let o = run(d, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    ok(&["convert", "a.jtr", "-o", "a.csv"]);
    ok(&["convert", "a.csv", "-o", "b.jtr"]);
    ok(&["convert", "b.jtr", "-o", "a.jsonl"]);
    ok(&["convert", "a.jtr", "-o", "a.cpu{cpu}.lgs"]);
    ok(&["convert", "a.cpu0.lgs", "a.cpu1.lgs", "-o", "c.jtr"]);
    let cmp: serde_json::Value = serde_json::from_str(&ok(&[
        "--json", "compare", "a.jtr", "c.jtr", "--plot", "cmp.svg",
    ]))
    .unwrap();
    assert_eq!(cmp["ks_statistic"], 0.0);
    assert_eq!(cmp["noise_ratio_diff"], 0.0);
    ok(&[
        "slice", "a.jtr", "--start", "0.5s", "--end", "1s", "--cpus", "1", "-o", "s.jtr",
    ]);
    let s: serde_json::Value = serde_json::from_str(&ok(&["--json", "stats", "s.jtr"])).unwrap();
    assert_eq!(s["stats"]["streams"].as_array().unwrap().len(), 1);
    assert_eq!(s["stats"]["overall"]["duration_ns"], 500_000_000);
    let m: serde_json::Value = serde_json::from_str(&ok(&[
        "--json",
        "merge",
        "a.jtr",
        "--min-sleep",
        "1ms",
        "-o",
        "m.jtr",
    ]))
    .unwrap();
    assert!(m["merged"].as_u64().unwrap() > 0);
    ok(&["scale", "a.jtr", "3", "-o", "x3.jtr"]);
    let x: serde_json::Value = serde_json::from_str(&ok(&["--json", "stats", "x3.jtr"])).unwrap();
    assert_eq!(x["stats"]["overall"]["duration_ns"], 12_000_000_000u64);
    for kind in ["density", "cdf", "timeseries"] {
        ok(&[
            "plot",
            "a.jtr",
            "x3.jtr",
            "--kind",
            kind,
            "-o",
            &format!("{kind}.svg"),
        ]);
        assert!(d.join(format!("{kind}.svg")).exists());
    }
}

#[test]
fn bad_input_gives_one_error_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = synth(d, "a.jtr");
    assert_error(&run(d, &["stats", "missing.jtr"]), "missing.jtr");
    std::fs::write(d.join("empty.jtr"), b"").unwrap();
    assert_error(&run(d, &["stats", "empty.jtr"]), "empty");
    std::fs::write(d.join("garbage.jtr"), b"\x00\x01garbage garbage garbage").unwrap();
    assert_error(&run(d, &["stats", "garbage.jtr"]), "not a .jtr trace");
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[8] = 7;
    std::fs::write(d.join("version.jtr"), &bytes).unwrap();
    assert_error(&run(d, &["stats", "version.jtr"]), "version 7");
    assert_error(
        &run(d, &["scale", "a.jtr", "0", "-o", "z.jtr"]),
        "greater than 0",
    );
    assert_error(
        &run(d, &["scale", "a.jtr", "-2", "-o", "z.jtr"]),
        "greater than 0",
    );
    let o = run(
        d,
        &[
            "synth",
            "periodic:period=1fortnight,dur=1us",
            "--duration",
            "1s",
            "-o",
            "q.jtr",
        ],
    );
    assert_error(&o, "unknown unit `fortnight`");
    let o = run(
        d,
        &[
            "synth",
            "poisson:rate=1/s,dur=1us",
            "--duration",
            "1parsec",
            "-o",
            "q.jtr",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("unknown unit `parsec`"));
    std::fs::write(d.join("bad.csv"), "cpu,start_ns,run_ns\n0,10,x\n").unwrap();
    assert_error(&run(d, &["stats", "bad.csv"]), "bad.csv:2:");
}

#[test]
fn truncated_and_damaged_fail_unless_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = synth(d, "a.jtr");
    let bytes = std::fs::read(&good).unwrap();
    // The end chunk is small and last: find it by walking the chunks.
    let hlen = u32::from_le_bytes(bytes[10..14].try_into().unwrap()) as usize;
    let mut at = 18 + hlen;
    let mut offsets = Vec::new();
    while at + 9 <= bytes.len() {
        offsets.push(at);
        at += 9 + u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
    }
    let last = *offsets.last().unwrap();
    std::fs::write(d.join("trunc.jtr"), &bytes[..last]).unwrap();
    // Truncated: the end chunk's windows and loss counters are gone, refused like damage
    // (integrity.rs holds the exact lines).
    assert_error(&run(d, &["stats", "trunc.jtr"]), "truncated after");
    let o = run(d, &["stats", "trunc.jtr", "--salvage"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("warning: ") && e.contains("truncated after"),
        "{e}"
    );

    let mut bad = bytes.clone();
    bad[offsets[1] + 12] ^= 0xff;
    std::fs::write(d.join("bad.jtr"), &bad).unwrap();
    assert_error(&run(d, &["stats", "bad.jtr"]), "chunk 1");
    let o = run(d, &["stats", "bad.jtr", "--salvage"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: ") && stderr(&o).contains("chunk 1"));
}

/// Where each writer's output goes: devices and links are never replaced by a regular file,
/// a multi-stream LogGOPSim export without `{cpu}` is refused, and a replaced file is named.
#[test]
fn writers_write_through_devices_and_links_and_say_what_they_replaced() {
    use std::os::unix::fs::{symlink, FileTypeExt};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    synth(d, "a.jtr");
    let is_null_device = || {
        std::fs::symlink_metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    };
    let writers: [&[&str]; 5] = [
        &["convert", "a.jtr"],
        &[
            "synth",
            "periodic:period=1ms,dur=10us",
            "--duration",
            "100ms",
        ],
        &["scale", "a.jtr", "2"],
        &["slice", "a.jtr", "--cpus", "0"],
        &["merge", "a.jtr", "--min-sleep", "1us"],
    ];
    for w in writers {
        let args: Vec<&str> = w
            .iter()
            .copied()
            .chain(["-o", "/dev/null", "--to", "jtr"])
            .collect();
        let o = run(d, &args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(is_null_device(), "{args:?} replaced /dev/null");
        assert!(!stderr(&o).contains("panicked"));
    }
    if Path::new("/dev/full").exists() {
        let o = run(d, &["convert", "a.jtr", "-o", "/dev/full", "--to", "csv"]);
        assert_error(&o, "/dev/full");
        assert!(std::fs::metadata("/dev/full")
            .unwrap()
            .file_type()
            .is_char_device());
    }
    // A link to a file: the target is replaced, the link stays a link.
    std::fs::write(d.join("target.jtr"), b"old").unwrap();
    symlink(d.join("target.jtr"), d.join("link.jtr")).unwrap();
    let o = run(d, &["scale", "a.jtr", "2", "-o", "link.jtr"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(d.join("link.jtr"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::metadata(d.join("target.jtr")).unwrap().len() > 3);
    assert!(stderr(&o).contains("replaced link.jtr"), "{}", stderr(&o));
    // A dangling link is refused, not created through.
    symlink(d.join("nowhere.jtr"), d.join("dangling.jtr")).unwrap();
    assert_error(
        &run(d, &["scale", "a.jtr", "2", "-o", "dangling.jtr"]),
        "symbolic link",
    );
    assert!(!d.join("nowhere.jtr").exists());
    // Multi-stream LogGOPSim: the user's name literally, or a clear refusal.
    assert_error(&run(d, &["convert", "a.jtr", "-o", "x.lgs"]), "{cpu}");
    assert!(!d.join("x.cpu0.lgs").exists() && !d.join("x.lgs").exists());
    // A new file is created silently; replacing one is said on standard error.
    let o = run(d, &["convert", "a.jtr", "-o", "n.csv"]);
    assert!(
        o.status.success() && stderr(&o).is_empty(),
        "{}",
        stderr(&o)
    );
    let o = run(d, &["convert", "a.jtr", "-o", "n.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim(), "replaced n.csv");
}

#[test]
fn synth_refuses_a_trace_too_large_for_memory_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        dir.path(),
        &[
            "synth",
            "periodic:period=1ms,dur=1us",
            "--duration",
            "10s",
            "--streams",
            "1000000000",
            "-o",
            "big.jtr",
        ],
    );
    assert_error(&o, "over the limit of 4 GiB: use at most");
    assert!(!dir.path().join("big.jtr").exists());
}

/// Issue 30's sweep: a density or CDF of a trace without detours was an empty chart written
/// with exit 0 (now refused, naming the time series that can be drawn); `stats --scale` or
/// `--share` without `--overhead` were silently ignored, any value accepted (now refused by
/// the parser); and a missing required argument is named on the error's one line.
#[test]
fn charts_of_no_run_times_and_options_that_would_do_nothing_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    synth(d, "a.jtr");
    let o = run(
        d,
        &[
            "synth",
            "poisson:rate=0.001/s,dur=1us",
            "--duration",
            "1ms",
            "-o",
            "q.jtr",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for kind in ["density", "cdf"] {
        let o = run(
            d,
            &["plot", "a.jtr", "q.jtr", "--kind", kind, "-o", "p.svg"],
        );
        assert_error(
            &o,
            "error: q.jtr has no detours: no run-times to draw (--kind timeseries draws its \
             quiet time line)",
        );
        assert!(!d.join("p.svg").exists());
    }
    let o = run(d, &["plot", "q.jtr", "--kind", "timeseries", "-o", "p.svg"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.join("p.svg").exists());
    for args in [["--scale", "0"], ["--share", "0.5"]] {
        let o = run(d, &["stats", "a.jtr", args[0], args[1]]);
        assert_error(
            &o,
            "error: the following required arguments were not provided: --overhead <OVERHEAD>",
        );
    }
    let o = run(d, &["stats", "a.jtr", "--overhead", "10us", "--scale", "0"]);
    assert_error(
        &o,
        "error: scale 0 must be a finite number in (0, 1000], the scales a replay accepts",
    );
    let o = run(d, &["synth", "periodic:period=1ms,dur=10us", "-o", "s.jtr"]);
    assert_error(
        &o,
        "error: the following required arguments were not provided: --duration <DURATION>",
    );
}

#[test]
fn compare_with_a_trace_without_detours_says_there_is_nothing_to_compare() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    synth(d, "a.jtr");
    // One detour per 1000 s on average, over 1 ms: no detour at all.
    let o = run(
        d,
        &[
            "synth",
            "poisson:rate=0.001/s,dur=1us",
            "--duration",
            "1ms",
            "-o",
            "empty.jtr",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value =
        serde_json::from_slice(&run(d, &["--json", "stats", "empty.jtr"]).stdout).unwrap();
    assert_eq!(s["stats"]["overall"]["count"], 0, "{s}");
    assert_error(
        &run(d, &["compare", "a.jtr", "empty.jtr"]),
        "empty.jtr has no detours",
    );
    assert_error(
        &run(d, &["compare", "empty.jtr", "a.jtr"]),
        "empty.jtr has no detours",
    );
}

#[test]
fn attribution_reads_the_sidecar_of_its_own_trace_only() {
    use jitter_trace::attribution::{sidecar_path, Attribution, ATTRIBUTION_VERSION};
    let dir = tempfile::tempdir().unwrap();
    let t = synth(dir.path(), "a.jtr");
    assert_error(&run(dir.path(), &["attribution", "a.jtr"]), "--attribute");
    assert_error(&run(dir.path(), &["attribution", "none.jtr"]), "none.jtr");
    let start = jitter_trace::read_trace(&t)
        .unwrap()
        .trace
        .header
        .collection_start_unix_ns;
    let mut a = Attribution {
        version: ATTRIBUTION_VERSION,
        collection_start_unix_ns: start + 1,
        ..Attribution::default()
    };
    a.write(&sidecar_path(&t)).unwrap();
    assert_error(
        &run(dir.path(), &["attribution", "a.jtr"]),
        "another collection",
    );
    a.collection_start_unix_ns = start;
    a.write(&sidecar_path(&t)).unwrap();
    let o = run(dir.path(), &["--json", "attribution", "a.jtr"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["detours"], 0);
    std::fs::write(sidecar_path(&t), b"not json").unwrap();
    assert_error(
        &run(dir.path(), &["attribution", "a.jtr"]),
        "not an attribution",
    );
}

/// Two synthetic runs in `d`, `a.jtr` and `b.jtr`, with attribution sidecars: 2 s of a timer
/// every 4 ms; in b also a daemon every 10 ms, with the timer every fifth time, and one steal
/// tick (a's sidecar is from before steal was recorded).
fn attributed_pair(d: &Path) {
    use jitter_trace::attribution::{
        sidecar_path, AttributedDetour, Attribution, CpuAttribution, Part, ATTRIBUTION_VERSION,
    };
    use jitter_trace::steal::Steal;
    let a = synth(d, "a.jtr");
    let b = synth(d, "b.jtr");
    let start = jitter_trace::read_trace(&a)
        .unwrap()
        .trace
        .header
        .collection_start_unix_ns;
    // 2 s: a timer every 4 ms; in b also a daemon every 10 ms, with the timer every fifth time.
    let one = |t: u64, parts: &[(&str, u64)]| AttributedDetour {
        start_ns: t,
        run_ns: parts.iter().map(|p| p.1).sum::<u64>() + 500,
        source: parts[0].0.into(),
        combination: parts.iter().map(|p| p.0).collect::<Vec<_>>().join("+"),
        explained_ns: parts.iter().map(|p| p.1).sum(),
        parts: parts
            .iter()
            .map(|&(s, ns)| Part {
                source: s.into(),
                start_ns: t,
                ns,
            })
            .collect(),
    };
    let sidecar = |daemon: bool| {
        let mut detours: Vec<AttributedDetour> = (0..500)
            .map(|k| one(1_000_000 + k * 4_000_000, &[("timer", 2_000)]))
            .collect();
        if daemon {
            detours.extend((0..200).map(|k| {
                let t = 3_000_000 + k * 10_000_000;
                if k % 5 == 0 {
                    one(t, &[("timer", 2_000), ("task:d1", 300_000)])
                } else {
                    one(t, &[("task:d1", 300_000)])
                }
            }));
        }
        detours.sort_by_key(|d| d.start_ns);
        Attribution {
            version: ATTRIBUTION_VERSION,
            collection_start_unix_ns: start,
            cpus: vec![CpuAttribution {
                cpu: 0,
                begin_ns: 0,
                end_ns: 2_000_000_000,
                detours,
                // b recorded 1 steal tick; a is a sidecar from before steal was recorded.
                steal: daemon.then_some(Steal {
                    ticks: 1,
                    tick_ns: 10_000_000,
                    window_ns: 2_001_000_000,
                }),
                ..CpuAttribution::default()
            }],
            ..Attribution::default()
        }
    };
    sidecar(false).write(&sidecar_path(&a)).unwrap();
    sidecar(true).write(&sidecar_path(&b)).unwrap();
}

#[test]
fn diff_and_modes_and_charts_of_attributed_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    attributed_pair(d);
    let o = run(d, &["--json", "diff", "a.jtr", "b.jtr"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let change = |v: &serde_json::Value, s: &str| {
        v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["source"] == s)
            .map(|c| c["change"].as_str().unwrap().to_string())
    };
    assert_eq!(change(&v, "task:d1").as_deref(), Some("new"), "{v}");
    assert_eq!(v["mode"], "frequency");
    let o = run(d, &["diff", "b.jtr", "a.jtr"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("task:d1") && l.contains("vanished")),
        "{text}"
    );
    // Time mode: the combination is a source of its own.
    let o = run(d, &["--json", "diff", "--mode", "time", "a.jtr", "b.jtr"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(change(&v, "timer+task:d1").as_deref(), Some("new"), "{v}");
    let o = run(d, &["--json", "attribution", "--mode", "time", "b.jtr"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mode"], "time");
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["source"] == "task:d1")
        .unwrap();
    assert_eq!(row["count"], 160);
    let p = row["periods"][0]["period_ns"].as_f64().unwrap();
    assert!((p - 10e6).abs() < 10e6 * 0.05, "{row}");
    // Steal beside the unattributed time: 700 detours × 500 ns = 0.35 ms against 1 tick
    // (± 2) of 10 ms cannot be resolved; a's sidecar has no steal.
    let steal = &v["steal"][0];
    assert_eq!(
        (&steal["cpu"], &steal["unattributed_ns"], &steal["steal_ns"]),
        (
            &serde_json::json!(0),
            &serde_json::json!(350_000),
            &serde_json::json!(10_000_000)
        ),
        "{steal}"
    );
    assert_eq!(steal["verdict"]["kind"], "unresolved", "{steal}");
    let o = run(d, &["attribution", "b.jtr"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("cannot resolve: steal is counted in whole ticks of 10 ms"),
        "{text}"
    );
    let o = run(d, &["attribution", "a.jtr"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("# steal: steal time not recorded"), "{text}");
    // Charts.
    let o = run(
        d,
        &[
            "attribution",
            "b.jtr",
            "--bars-svg",
            "bars.svg",
            "--density-svg",
            "density.svg",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["bars.svg", "density.svg"] {
        let svg = std::fs::read_to_string(d.join(f)).unwrap();
        // The title names the trace by its stem, not its file name or path.
        assert!(
            svg.contains("task:d1") && svg.contains("by source: b\n") && !svg.contains("b.jtr"),
            "{f}"
        );
    }
    // Who fills the 300-400 µs bucket, as CSV too.
    let o = run(
        d,
        &[
            "--json",
            "attribution",
            "b.jtr",
            "--bucket",
            "300us..400us",
            "--csv",
            "t.csv",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["detours"], 200, "{v}");
    // Steal is the whole run's: a bucket's report compares none.
    assert_eq!(v["steal"], serde_json::json!([]), "{v}");
    let csv = std::fs::read_to_string(d.join("t.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "{csv}"); // header, task:d1, timer, unattributed
    assert!(csv.lines().nth(1).unwrap().starts_with("task:d1,"), "{csv}");
    assert_error(
        &run(d, &["attribution", "b.jtr", "--bucket", "13us..11us"]),
        "upper end",
    );
    assert_error(
        &run(d, &["attribution", "b.jtr", "--bucket", "11us"]),
        "LO..HI",
    );
    assert_error(
        &run(d, &["attribution", "--mode", "space", "b.jtr"]),
        "unknown mode `space`",
    );
    assert_error(&run(d, &["diff", "a.jtr", "none.jtr"]), "none.jtr");
}

#[test]
fn outputs_are_checked_before_any_input_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("sub")).unwrap();
    // The input does not exist: the output's error comes first, so nothing was read.
    let cases: [(&[&str], String); 6] = [
        (
            &["convert", "missing.jtr", "--to", "jtr", "-o", "sub"],
            "error: -o sub is a directory, not an output file".into(),
        ),
        (
            &["slice", "missing.jtr", "-o", "no/such/o.jtr"],
            "error: -o no/such/o.jtr: folder no/such does not exist (create it first)".into(),
        ),
        (
            &["convert", "missing.jtr", "-o", "x.csv", "--to", "jtr"],
            "error: x.csv is named as CSV but --to .jtr was given: name the file for its \
             format or drop --to"
                .into(),
        ),
        (
            &["plot", "missing.jtr", "-o", "p.png"],
            "error: -o p.png: this writes an SVG image, but the name ends in .png; name it .svg"
                .into(),
        ),
        (
            &[
                "compare",
                "missing.jtr",
                "missing.jtr",
                "--plot",
                "no/c.svg",
            ],
            "error: --plot no/c.svg: folder no does not exist (create it first)".into(),
        ),
        (
            &["nodes", "missing.jtr", "--plot", "sub"],
            "error: --plot sub is a directory, not an output file".into(),
        ),
    ];
    for (args, want) in cases {
        let o = run(d, args);
        assert_error(&o, &want);
        assert_eq!(stderr(&o).trim_end(), want, "{args:?}");
    }
    let mut left: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["sub"]);
}

#[test]
fn transforms_refuse_results_that_are_not_the_trace_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    synth(d, "t.jtr");
    let o = run(d, &["slice", "t.jtr", "--cpus", "0,0", "-o", "o.jtr"]);
    assert_error(
        &o,
        "error: CPU 0 is listed twice: each stream is kept once (list every CPU once)",
    );
    let o = run(d, &["slice", "t.jtr", "--start", "5s", "-o", "o.jtr"]);
    assert_error(
        &o,
        "error: slice start 5000000000 ns is at or after the trace's end (2000000000 ns from \
         its start): the slice would hold nothing",
    );
    let o = run(d, &["scale", "t.jtr", "1e-12", "-o", "o.jtr"]);
    assert_error(&o, "error: scale 0.000000000001 would merge ");
    assert!(stderr(&o).contains("use a larger factor"), "{}", stderr(&o));
    let o = run(
        d,
        &[
            "synth",
            "periodic:period=1ms,dur=2ms",
            "--duration",
            "1s",
            "-o",
            "o.jtr",
        ],
    );
    assert_error(
        &o,
        "error: `periodic:period=1ms,dur=2ms`: dur (with dur_jitter) must be shorter than the \
         period, or the detours cover the whole stream",
    );
    assert!(!d.join("o.jtr").exists());
    // The format follows the name: `-o x.csv` writes CSV.
    let o = run(d, &["convert", "t.jtr", "-o", "x.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(d.join("x.csv")).unwrap();
    assert!(
        text.is_ascii() && text.contains(','),
        "{}",
        &text[..80.min(text.len())]
    );
}

#[test]
fn a_text_input_is_imported_through_a_temporary_trace_removed_on_every_exit() {
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let in_tmp = |args: &[&str]| {
        (bin().current_dir(d.path()).env("TMPDIR", &tmp).args(args))
            .output()
            .unwrap()
    };
    let left = || std::fs::read_dir(&tmp).unwrap().count();
    // Rows out of order: grouped by CPU and sorted by start.
    let csv = "cpu,start_ns,run_ns\n1,900,5\n0,300,20\n1,100,7\n0,50,10\n";
    std::fs::write(d.path().join("t.csv"), csv).unwrap();
    let o = in_tmp(&["convert", "t.csv", "-o", "t2.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let back = std::fs::read_to_string(d.path().join("t2.csv")).unwrap();
    let expected = "cpu,start_ns,run_ns,sleep_ns\n0,50,10,240\n0,300,20,585\n\
                    1,100,7,793\n1,900,5,0\n";
    assert_eq!(back, expected);
    assert_eq!(left(), 0, "a temporary import was left behind");
    // A malformed row (an overlap found once sorted) names its line; nothing left either.
    std::fs::write(d.path().join("o.csv"), format!("{csv}0,305,1\n")).unwrap();
    let o = in_tmp(&["stats", "o.csv"]);
    assert_error(
        &o,
        "o.csv:6: detour at 305 ns overlaps the one at 300 ns (run 20 ns)",
    );
    assert_eq!(left(), 0, "a failed import left its temporary behind");
    // A directory that cannot hold the import: one line naming what failed.
    let o = (bin()
        .current_dir(d.path())
        .env("TMPDIR", d.path().join("missing")))
    .args(["stats", "t.csv"])
    .output()
    .unwrap();
    assert_error(&o, "cannot create a temporary file to import");
}

/// `jitter-trace stats` of a CSV killed with SIGKILL in the middle of its import (once its
/// spilled rows are on disk) leaves nothing in its `$TMPDIR`: the import's files were unlinked
/// as they were created. (Before, its `jitter-trace-import-*` directory stayed.)
#[test]
fn an_import_killed_mid_way_leaves_nothing_in_tmpdir() {
    use std::io::Write as _;
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // 10⁶ rows of one CPU, last first: the import sorts them on disk (runs of 2¹⁸ rows).
    let csv = d.path().join("big.csv");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&csv).unwrap());
    writeln!(w, "cpu,start_ns,run_ns").unwrap();
    for i in (0..1_000_000u64).rev() {
        writeln!(w, "0,{},{}", 1_000 + i * 1_000, 100 + i % 300).unwrap();
    }
    drop(w);
    let mut child = (bin().current_dir(d.path()).env("TMPDIR", &tmp))
        .args(["stats", "big.csv"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait (at most 120 s) until the child holds a file under TMPDIR with rows in it.
    let fds = PathBuf::from(format!("/proc/{}/fd", child.id()));
    let spilled = || {
        let Ok(entries) = std::fs::read_dir(&fds) else {
            return false;
        };
        entries.flatten().any(|e| {
            let into_tmp = std::fs::read_link(e.path()).is_ok_and(|l| l.starts_with(&tmp));
            into_tmp && std::fs::metadata(e.path()).is_ok_and(|m| m.len() > 0)
        })
    };
    let begun = std::time::Instant::now();
    while !spilled() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the import ended before it was caught spilling"
        );
        assert!(begun.elapsed().as_secs() < 120, "no spill within 120 s");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "killed mid-way: {status:?}");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
