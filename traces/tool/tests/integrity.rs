//! The one policy on a trace that lacks detours, in every `jitter-trace` command: a ring's loss,
//! a damaged chunk and a truncated file are refused with one line naming what is missing and
//! `--salvage`; salvaged, the share kept is printed (and recorded in JSON).

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

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Fails unless the command exits with 2 and prints exactly `error: {line}`.
fn assert_error_line(o: &Output, line: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e, format!("error: {line}\n"));
}

/// Two streams of periodic noise, 1 ms × 20 µs for 2 s: 2000 detours each, 40 ms of noise.
fn synth(dir: &Path, name: &str) -> PathBuf {
    let o = run(
        dir,
        &[
            "synth",
            "periodic:period=1ms,dur=20us",
            "--duration",
            "2s",
            "--streams",
            "2",
            "-o",
            name,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    dir.join(name)
}

/// `synth`'s trace with stream 1's ring said to have dropped `lost` detours of `lost_ns`.
fn lossy(dir: &Path, name: &str, lost: u64, lost_ns: u64) -> PathBuf {
    let path = synth(dir, name);
    let mut t = jitter_trace::read_trace(&path).unwrap().trace;
    t.streams[1].counters.insert("lost_detours".into(), lost);
    t.streams[1].counters.insert("lost_ns".into(), lost_ns);
    jitter_trace::write_trace(&path, &t).unwrap();
    path
}

/// Byte offsets of the chunks of a `.jtr` file, in order.
fn chunk_offsets(bytes: &[u8]) -> Vec<usize> {
    let hlen = u32::from_le_bytes(bytes[10..14].try_into().unwrap()) as usize;
    let mut at = 18 + hlen;
    let mut offsets = Vec::new();
    while at + 9 <= bytes.len() {
        offsets.push(at);
        at += 9 + u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
    }
    offsets
}

const REFUSED: &str = "refused (--salvage goes on with what was kept and prints the share kept)";

#[test]
fn a_ring_s_loss_is_refused_by_every_command_and_salvaged_with_the_share_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Stream 1 kept 2000 of 4000 detours, 40 ms of 80 ms.
    lossy(d, "l.jtr", 2000, 40_000_000);
    synth(d, "ok.jtr");
    let lost = format!(
        "l.jtr: the collector's ring dropped 2000 of 6000 detours (40.000 ms of noise) on CPU 1: \
         2000 of 4000 detours kept there; {REFUSED}"
    );
    for args in [
        &["stats", "l.jtr"][..],
        &["convert", "l.jtr", "-o", "x.csv"],
        &["slice", "l.jtr", "--fraction", "0:0.5", "-o", "x.jtr"],
        &["scale", "l.jtr", "2", "-o", "x.jtr"],
        &["merge", "l.jtr", "--min-sleep", "1us", "-o", "x.jtr"],
        &["plot", "l.jtr", "-o", "x.svg"],
        &["compare", "ok.jtr", "l.jtr"],
    ] {
        assert_error_line(&run(d, args), &lost);
    }
    assert!(!d.join("x.csv").exists() && !d.join("x.svg").exists());
    let o = run(d, &["stats", "l.jtr", "--salvage"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kept = "share kept: 4000 of 6000 detours (66.67 %), 66.67 % of the noise time";
    assert!(
        stdout(&o).starts_with(&format!("# {kept}\n")),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        stderr(&o),
        format!(
            "warning: l.jtr: the collector's ring dropped 2000 of 6000 detours (40.000 ms of \
             noise) on CPU 1: 2000 of 4000 detours kept there ({kept})\n"
        )
    );
    let o = run(d, &["--json", "stats", "l.jtr", "--salvage"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let i = &v["integrity"];
    assert_eq!(
        (i["detours_kept"].as_u64(), i["detours_lost"].as_u64()),
        (Some(4000), Some(2000))
    );
    assert!((i["detour_share_kept"].as_f64().unwrap() - 4000.0 / 6000.0).abs() < 1e-12);
    assert_eq!(i["salvaged"], true);
    // A whole trace records nothing missing, and prints no share.
    let o = run(d, &["--json", "stats", "ok.jtr"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["integrity"]["detour_share_kept"].as_f64(), Some(1.0));
    assert_eq!(v["integrity"]["salvaged"], false);
    assert!(!stdout(&run(d, &["stats", "ok.jtr"])).contains("share kept"));
    // The loss travels with what is written from it: the copy is refused alike.
    let o = run(d, &["convert", "l.jtr", "--salvage", "-o", "c.jtr"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_error_line(
        &run(d, &["stats", "c.jtr"]),
        &lost.replace("l.jtr", "c.jtr"),
    );
}

#[test]
fn a_loss_within_a_tenth_of_a_percent_is_taken_and_its_share_shown() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 2 of 2002 detours (0.0999 %) and 20 µs of 40.02 ms (0.0500 %): within both bounds.
    lossy(d, "t.jtr", 2, 20_000);
    let o = run(d, &["stats", "t.jtr"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o)
        .starts_with("# share kept: 4000 of 4002 detours (99.95 %), 99.98 % of the noise time\n"));
    // 5 of 2005 on that stream (0.25 %): refused.
    lossy(d, "u.jtr", 5, 20_000);
    let o = run(d, &["stats", "u.jtr"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // 1 detour holding 1 ms of the stream's 41 ms (2.4 % of the time): refused by its time.
    lossy(d, "v.jtr", 1, 1_000_000);
    let o = run(d, &["stats", "v.jtr"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn damage_and_truncation_are_refused_alike_and_salvaged_with_what_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bytes = std::fs::read(synth(d, "a.jtr")).unwrap();
    let offsets = chunk_offsets(&bytes);
    let last = *offsets.last().unwrap();
    std::fs::write(d.join("trunc.jtr"), &bytes[..last]).unwrap();
    assert_error_line(
        &run(d, &["stats", "trunc.jtr"]),
        &format!("trunc.jtr: trace is truncated after 4000 records (no end chunk); {REFUSED}"),
    );
    let mut bad = bytes.clone();
    bad[offsets[1] + 12] ^= 0xff;
    std::fs::write(d.join("bad.jtr"), &bad).unwrap();
    let at = offsets[1];
    let o = run(d, &["stats", "bad.jtr"]);
    assert_error_line(
        &o,
        &format!(
            "bad.jtr: chunk 1 (at byte {at}) is damaged: checksum mismatch; kept the 2000 records \
             before it; {REFUSED}"
        ),
    );
    let o = run(d, &["stats", "bad.jtr", "--salvage"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with(
        "# share kept: the 2000 detours before the defect, of a whole the file no longer counts\n"
    ));
    // A trace written from a salvaged one says so, and is refused alike.
    let o = run(d, &["convert", "bad.jtr", "--salvage", "-o", "s.jtr"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(d, &["stats", "s.jtr"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.starts_with("error: s.jtr: written from a salvaged trace (chunk 1 (at byte")
            && e.ends_with(&format!("{REFUSED}\n")),
        "{e}"
    );
}

#[test]
fn nodes_marks_a_node_with_loss_or_damage_unusable_and_shows_no_number_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for n in ["a", "b", "c", "d"] {
        synth(d, &format!("{n}.jtr"));
    }
    lossy(d, "l.jtr", 2000, 40_000_000);
    let o = run(d, &["nodes", "a.jtr", "b.jtr", "c.jtr", "d.jtr", "l.jtr"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let row = text.lines().find(|l| l.contains("UNUSABLE")).unwrap();
    assert!(
        row.contains("UNUSABLE") && !row.contains("0.0000"),
        "{text}"
    );
    assert!(
        text.contains(
            "unusable: l (l.jtr): the collector's ring dropped 2000 of 6000 detours (40.000 ms of \
             noise) on CPU 1: 2000 of 4000 detours kept there: its numbers describe part of what \
             the probe saw (--salvage ranks it with what was kept)"
        ),
        "{text}"
    );
    // Salvaged, it is ranked, and its share kept named.
    let o = run(
        d,
        &[
            "nodes",
            "a.jtr",
            "b.jtr",
            "c.jtr",
            "d.jtr",
            "l.jtr",
            "--salvage",
        ],
    );
    let text = stdout(&o);
    assert!(!text.contains("UNUSABLE"), "{text}");
    assert!(
        text.contains(
            "partial: l (l.jtr): share kept: 4000 of 6000 detours (66.67 %), 66.67 % of the noise \
             time"
        ),
        "{text}"
    );
}
