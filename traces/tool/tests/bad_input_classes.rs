//! `jitter-trace` against the four classes of bad input, each through its one mechanism
//! (docs/RELIABILITY.md, "Bad input by class"): an output checked before the work
//! (`output::check_output`, `check_room`), a name or window that must exist in the input
//! (`names`), an input whose content is another format than its name says (`sniff`),
//! and a figure the input cannot support (`stats::TraceStats::checked`, `check_replay_scale`).
//! Every refusal is exit 2 with one `error:` line, and leaves nothing behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jitter-trace"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2, exactly one line, and it is `error: ` followed by `want`.
fn refused(o: &Output, want: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert_eq!(e.trim_end(), format!("error: {want}"));
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `t.jtr` (one stream, a 20 µs detour every ms for 1 s) and its attribution: each detour half
/// `timer`, half unexplained.
fn attributed(d: &Path) -> PathBuf {
    use jitter_trace::attribution::{
        sidecar_path, AttributedDetour, Attribution, CpuAttribution, Part, ATTRIBUTION_VERSION,
    };
    let o = run(
        d,
        &[
            "synth",
            "periodic:period=1ms,dur=20us",
            "--duration",
            "1s",
            "-o",
            "t.jtr",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let t = d.join("t.jtr");
    let trace = jitter_trace::read_trace(&t).unwrap().trace;
    let s = &trace.streams[0];
    let detours = (s.records.iter())
        .map(|r| AttributedDetour {
            start_ns: r.start_ns,
            run_ns: r.run_ns,
            source: "timer".into(),
            combination: "timer".into(),
            explained_ns: r.run_ns / 2,
            parts: vec![Part {
                source: "timer".into(),
                start_ns: r.start_ns,
                ns: r.run_ns / 2,
            }],
        })
        .collect();
    Attribution {
        version: ATTRIBUTION_VERSION,
        collection_start_unix_ns: trace.header.collection_start_unix_ns,
        cpus: vec![CpuAttribution {
            cpu: s.cpu,
            begin_ns: s.begin_ns,
            end_ns: s.end_ns,
            detours,
            ..CpuAttribution::default()
        }],
        ..Attribution::default()
    }
    .write(&sidecar_path(&t))
    .unwrap();
    t
}

#[test]
fn outputs_are_checked_for_type_and_extension_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    attributed(d);
    // Named for another format.
    refused(
        &run(d, &["perfetto", "t.jtr", "-o", "p.jtr"]),
        "-o p.jtr: this writes Chrome/Perfetto trace events (JSON), but the name ends in .jtr; \
         name it .json",
    );
    // A filtered .jtr takes its attribution beside it: a directory there is refused before the
    // trace is read (was: after the work).
    std::fs::create_dir(d.join("f.jtr.attr.json")).unwrap();
    refused(
        &run(d, &["filter", "t.jtr", "--drop", "timer", "-o", "f.jtr"]),
        "-o writes f.jtr.attr.json is a directory, not an output file",
    );
    std::fs::create_dir(d.join("out.jtr")).unwrap();
    refused(
        &run(d, &["filter", "t.jtr", "--drop", "timer", "-o", "out.jtr"]),
        "-o out.jtr is a directory, not an output file",
    );
    assert_eq!(
        entries(d),
        vec!["f.jtr.attr.json", "out.jtr", "t.jtr", "t.jtr.attr.json"]
    );
}

#[test]
fn names_and_windows_must_exist_in_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    attributed(d);
    let hint = "jitter-trace attribution lists each with its share";
    refused(
        &run(
            d,
            &["filter", "t.jtr", "--drop", "task:nope", "-o", "f.jtr"],
        ),
        &format!(
            "--drop task:nope: the trace's attribution has no source `task:nope` (it has timer, \
             unattributed); {hint}"
        ),
    );
    refused(
        &run(d, &["filter", "t.jtr", "--keep", "nosuch", "-o", "f.jtr"]),
        &format!(
            "--keep nosuch: the trace's attribution has no source `nosuch` (it has timer, \
             unattributed); {hint}"
        ),
    );
    refused(
        &run(
            d,
            &["filter", "t.jtr", "--drop", "category:io", "-o", "f.jtr"],
        ),
        &format!(
            "--drop category:io: the trace's attribution has no source `category:io` (it has \
             timer, unattributed); {hint}"
        ),
    );
    refused(
        &run(
            d,
            &[
                "perfetto",
                "t.jtr",
                "--window",
                "100s..200s",
                "-o",
                "p.json",
            ],
        ),
        "--window 100.000 s..200.000 s: the trace lasts 1.000 s from its start, so the window \
         holds none of it",
    );
    refused(
        &run(
            d,
            &[
                "synth",
                "periodic:period=1ms,dur=10us,phase=5s",
                "--duration",
                "2s",
                "-o",
                "s.jtr",
            ],
        ),
        "`periodic:period=1000000ns,dur=10000ns,phase=5000000000ns`: phase 5.000 s: a trace of \
         this --duration lasts 2.000 s from its start, so the source would make no detour (give \
         a phase below the duration)",
    );
    refused(
        &run(d, &["attribution", "t.jtr", "--bucket", "1s..2s"]),
        "--bucket 1.000 s..2.000 s: none of the 1000 detours of t.jtr has a run-time in it",
    );
    refused(
        &run(d, &["slice", "t.jtr", "--cpus", "7", "-o", "s.jtr"]),
        "--cpus 7: the trace has no CPU 7 (it has 0)",
    );
    assert_eq!(entries(d), vec!["t.jtr", "t.jtr.attr.json"]);
    // What exists is taken: a kind (`timer`), `unattributed`, a window that ends past the end.
    for args in [
        &["filter", "t.jtr", "--drop", "timer", "-o", "f.jtr"][..],
        &["filter", "t.jtr", "--keep", "unattributed", "-o", "k.jtr"],
        &[
            "perfetto",
            "t.jtr",
            "--window",
            "500ms..20s",
            "-o",
            "p.json",
        ],
    ] {
        let o = run(d, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn an_input_of_another_format_is_named_for_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    attributed(d);
    std::fs::copy(d.join("t.jtr"), d.join("t.csv")).unwrap();
    refused(
        &run(d, &["stats", "t.csv"]),
        "t.csv: this is a .jtr trace, not CSV: name it .jtr, or give --from jtr",
    );
    std::fs::write(d.join("c.jtr"), "cpu,start_ns,run_ns\n0,10,5\n").unwrap();
    refused(
        &run(d, &["stats", "c.jtr"]),
        "c.jtr: this is text (CSV, JSON lines, sysjitter or LogGOPSim), not a .jtr trace: \
         jitter-trace convert reads it (--from names its format) and writes a .jtr",
    );
    refused(
        &run(d, &["stats", "t.jtr.attr.json", "--from", "jtr"]),
        "t.jtr.attr.json: this is an attribution sidecar (jitter-collect --attribute), not a .jtr \
         trace",
    );
    std::fs::write(d.join("z.csv"), b"\x1f\x8b\x08\x00\x00\x00").unwrap();
    refused(
        &run(d, &["convert", "z.csv", "-o", "z.jtr"]),
        "z.csv: this is compressed data, not CSV",
    );
}

#[test]
fn a_figure_the_input_cannot_support_is_not_printed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // One row and no window: the span of one detour is no observed time.
    std::fs::write(d.join("one.csv"), "cpu,start_ns,run_ns\n0,1000,20000\n").unwrap();
    let o = run(d, &["stats", "one.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for row in ["duration(s)", "detours/s", "noise(%)"] {
        let line = out.lines().find(|l| l.starts_with(row)).unwrap();
        assert_eq!(line.split_whitespace().nth(1), Some("-"), "{out}");
    }
    assert!(
        out.contains(
            "# cpu0: rate and noise not measured: the input states no window, and the span of \
             its detours is one detour"
        ),
        "{out}"
    );
    let max = out.lines().find(|l| l.starts_with("max(us)")).unwrap();
    assert_eq!(max.split_whitespace().nth(1), Some("20.000"), "{out}");
    let o = run(d, &["--json", "stats", "one.csv"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["stats"]["overall"]["noise_ratio"].is_null(), "{v}");
    // Two rows: measured over their span, and said so.
    std::fs::write(
        d.join("two.csv"),
        "cpu,start_ns,run_ns\n0,0,1000\n0,9000,1000\n",
    )
    .unwrap();
    let o = run(d, &["stats", "two.csv"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let noise = out.lines().find(|l| l.starts_with("noise(%)")).unwrap();
    assert_eq!(noise.split_whitespace().nth(1), Some("20.000"), "{out}");
    assert!(out.contains("# the input states no window"), "{out}");
    // Beside a measured trace: compare shows `-` and says why; nodes marks the node unusable.
    let o = run(d, &["compare", "one.csv", "two.csv"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("noise ratio:             - -> 20.0000 % (diff -)"),
        "{out}"
    );
    assert!(out.contains("note: one.csv has 1 detour"), "{out}");
    let o = run(d, &["nodes", "one.csv", "two.csv"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out.lines().find(|l| l.contains(" one ")).unwrap();
    assert!(row.ends_with("UNUSABLE") && !row.contains("NaN"), "{out}");
    // A scale no replay accepts is refused, shown as written.
    refused(
        &run(
            d,
            &["stats", "two.csv", "--overhead", "10us", "--scale", "1e300"],
        ),
        "scale 1e300 must be a finite number in (0, 1000], the scales a replay accepts",
    );
}
