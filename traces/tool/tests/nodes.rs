//! `jitter-trace nodes`: a cluster-wide collection of one trace per node, one of them made
//! noisier on purpose (a synthetic daemon waking every 1 ms for 100 µs, as the collector's
//! `daemon` example does), is ranked with that node first and flagged alone.

use std::path::Path;
use std::process::{Command, Output};

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jitter-trace"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const QUIET: &str = "poisson:rate=3000/s,dur=exp:2us+periodic:period=4ms,dur=15us";

/// Seven ordinary nodes and `noisy`, which runs the same noise plus a daemon.
fn collection(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for i in 0..7 {
        let name = format!("node{i}.jtr");
        let seed = i.to_string();
        let args = [
            "synth",
            QUIET,
            "--duration",
            "2s",
            "--streams",
            "2",
            "--seed",
            &seed,
            "-o",
            &name,
        ];
        ok(&run(dir, &args));
        files.push(name);
    }
    let noisy = format!("{QUIET}+periodic:period=1ms,dur=100us");
    let args = [
        "synth",
        &noisy,
        "--duration",
        "2s",
        "--streams",
        "2",
        "--seed",
        "99",
        "-o",
        "noisy.jtr",
    ];
    ok(&run(dir, &args));
    files.push("noisy.jtr".into());
    files
}

#[test]
fn the_node_beside_a_daemon_is_ranked_first_and_flagged_alone() {
    let dir = tempfile::tempdir().unwrap();
    let files = collection(dir.path());
    let mut args = vec!["nodes", "--plot", "nodes.svg"];
    args.extend(files.iter().map(String::as_str));
    let text = ok(&run(dir.path(), &args));
    let first = text.lines().nth(1).unwrap();
    assert!(first.trim_start().starts_with("1  noisy "), "{text}");
    assert!(first.ends_with("OUTLIER"), "{text}");
    assert_eq!(text.matches("OUTLIER").count(), 1, "{text}");
    assert!(
        text.contains("outlier: noisy (noisy.jtr): noise ratio above"),
        "{text}"
    );
    let svg = std::fs::read_to_string(dir.path().join("nodes.svg")).unwrap();
    assert!(svg.contains("node6") && svg.contains("noisy"));

    let mut args = vec!["--json", "nodes"];
    args.extend(files.iter().map(String::as_str));
    let v: serde_json::Value = serde_json::from_str(&ok(&run(dir.path(), &args))).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    let flagged: Vec<&str> = rows
        .iter()
        .filter(|r| !r["outlier"].as_array().unwrap().is_empty())
        .map(|r| r["summary"]["node"].as_str().unwrap())
        .collect();
    assert_eq!(flagged, ["noisy"]);
    // The daemon's 100 µs every 1 ms is 10 % of the time: its z-score is far beyond the cut.
    assert!(
        rows[0]["noise"]["z"].as_f64().unwrap() > 10.0,
        "{}",
        rows[0]
    );
    assert!(rows[0]["summary"]["stats"]["noise_ratio"].as_f64().unwrap() > 0.1);
}

#[test]
fn a_missing_trace_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["nodes", "absent.jtr"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("error: ") && e.contains("absent.jtr"), "{e}");
    let o = run(dir.path(), &["nodes", "--z", "0", "absent.jtr"]);
    assert_eq!(o.status.code(), Some(2));
}
