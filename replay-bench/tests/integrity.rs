//! `predict`, `run`, `choose-scale` and `study` honour what a trace lacks (its ring's loss, a
//! damaged chunk) by the one policy of `jitter_trace::integrity`: refused with one line before
//! any work, `--salvage` goes on and prints and records the share kept. (The case: a
//! flipped byte made `predict` say 40.4 % where the whole trace gives 3.4 %.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use jitter_report::report::Report;

mod common;

fn bench(args: &[&str]) -> Output {
    Command::new(common::BIN).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const REFUSED: &str = "refused (--salvage goes on with what was kept and prints the share kept)";

/// 1 ms × 5 µs periodic noise on one stream for 2 s (2000 detours), its ring said to have
/// dropped `lost` detours of `lost_ns`.
fn lossy(dir: &Path, name: &str, lost: u64, lost_ns: u64) -> PathBuf {
    lossy_of("periodic:period=1ms,dur=5us", dir, name, (lost, lost_ns))
}

/// [`lossy`] of the noise `spec`.
fn lossy_of(spec: &str, dir: &Path, name: &str, (lost, lost_ns): (u64, u64)) -> PathBuf {
    let spec = spec.parse().unwrap();
    let mut t = jitter_trace::synth::synthesize(&spec, 1, 2_000_000_000, 1).unwrap();
    t.streams[0].counters.insert("lost_detours".into(), lost);
    t.streams[0].counters.insert("lost_ns".into(), lost_ns);
    let p = dir.join(name);
    jitter_trace::write_trace(&p, &t).unwrap();
    p
}

/// A copy of `src` with one byte flipped inside its second chunk.
fn damaged(src: &Path, name: &str) -> PathBuf {
    let mut bytes = std::fs::read(src).unwrap();
    let hlen = u32::from_le_bytes(bytes[10..14].try_into().unwrap()) as usize;
    let first = 18 + hlen;
    let second =
        first + 9 + u32::from_le_bytes(bytes[first + 1..first + 5].try_into().unwrap()) as usize;
    bytes[second + 12] ^= 0xff;
    let p = src.with_file_name(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Fails unless the command failed with exactly one line, `error: {line}`, and printed nothing.
fn assert_refused(o: &Output, line: &str) {
    let e = stderr(o);
    assert!(!o.status.success(), "exit 0: {e}");
    let errors: Vec<&str> = e.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors, [format!("error: {line}")], "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn predict_refuses_a_lossy_or_damaged_trace_and_salvaged_records_the_share_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 1000 of 3000 detours lost.
    let l = lossy(d, "l.jtr", 1000, 5_000_000);
    let ls = l.to_str().unwrap();
    let base = [
        "predict", "--ranks", "1,4", "--sync", "none", "--phases", "200",
    ];
    let o = bench(&[&base[..], &["--trace", ls]].concat());
    assert_refused(
        &o,
        &format!(
            "{ls}: the collector's ring dropped 1000 of 3000 detours (5.000 ms of noise) on CPU \
             0: 2000 of 3000 detours kept there; {REFUSED}"
        ),
    );
    let out = d.join("p.json");
    let o = bench(
        &[
            &base[..],
            &["--trace", ls, "--salvage", "-o", out.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("l: share kept: 2000 of 3000 detours (66.67 %), 66.67 % of the noise time"),
        "{text}"
    );
    let r = Report::load(&out).unwrap();
    let i = r.config.trace.unwrap().integrity.unwrap();
    assert!(
        i.salvaged && i.detours_lost == 1000 && i.detours_kept == 2000,
        "{i:?}"
    );

    // One flipped byte: refused, naming the chunk, where it used to give a number from the
    // records before it.
    let whole = lossy(d, "w.jtr", 0, 0);
    let bad = damaged(&whole, "bad.jtr");
    let bs = bad.to_str().unwrap();
    let o = bench(&[&base[..], &["--trace", bs]].concat());
    let e = stderr(&o);
    assert!(
        e.starts_with(&format!("error: {bs}: chunk 1 (at byte "))
            && e.contains("is damaged: checksum mismatch; kept the ")
            && e.ends_with(&format!("{REFUSED}\n")),
        "{e}"
    );
    assert!(!o.status.success());
}

#[test]
fn choose_scale_and_study_refuse_alike() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let l = lossy(d, "trace.jtr", 1000, 5_000_000);
    let ls = l.to_str().unwrap();
    let line = format!(
        "{ls}: the collector's ring dropped 1000 of 3000 detours (5.000 ms of noise) on CPU 0: \
         2000 of 3000 detours kept there; {REFUSED}"
    );
    let cal = d.join("cal.json");
    std::fs::write(
        &cal,
        serde_json::to_string(&jitter_emulator::Calibration::default()).unwrap(),
    )
    .unwrap();
    let o = bench(&[
        "choose-scale",
        "--trace",
        ls,
        "--calibration",
        cal.to_str().unwrap(),
    ]);
    assert_refused(&o, &line);
    let o = bench(&["study", "--dir", d.to_str().unwrap()]);
    assert_refused(&o, &line);
    let o = bench(&["study", "--dir", d.to_str().unwrap(), "--salvage"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = std::fs::read_to_string(d.join("report.md")).unwrap();
    assert!(
        report.contains("trace.jtr lacks detours: share kept: 2000 of 3000 detours (66.67 %)"),
        "{report}"
    );
}

/// Every rank refuses before the benchmark starts (no rank hangs), the first line names the
/// loss; `--salvage` runs and records the share kept in the report.
#[test]
fn run_refuses_a_lossy_trace_on_every_rank_before_the_benchmark() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 20 % noise: a slowdown no busy machine hides from the run's own plausibility check.
    let l = lossy_of(
        "periodic:period=1ms,dur=200us",
        d,
        "l.jtr",
        (1000, 200_000_000),
    );
    let ls = l.to_str().unwrap();
    let r = common::run(2, &["--trace", ls], Duration::from_secs(60));
    assert_ne!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "error: {ls}: the collector's ring dropped 1000 of 3000 detours (200.000 ms of \
             noise) on CPU 0: 2000 of 3000 detours kept there; {REFUSED}"
        )),
        "{}",
        r.stderr
    );
    assert!(r.secs < 30.0, "refused only after {:.1} s", r.secs);
    let out = d.join("r.json");
    let r = common::run(
        1,
        &[
            "--trace",
            ls,
            "--salvage",
            "--period",
            "1s",
            "--warmup",
            "2",
            "--block-phases",
            "10",
            "--noise-probe",
            "200ms",
            "--overhead",
            "1us",
            "--min-sleep",
            "20us",
            "--lateness",
            "0ns",
            "-o",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout
            .contains("l: share kept: 2000 of 3000 detours (66.67 %)"),
        "{}",
        r.stdout
    );
    let rep = Report::load(&out).unwrap();
    let i = rep.config.trace.unwrap().integrity.unwrap();
    assert!(i.salvaged && i.detours_lost == 1000, "{i:?}");
}
