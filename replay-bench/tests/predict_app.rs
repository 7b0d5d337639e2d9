//! `replay-bench predict --app` through the binary: a profile and a trace in, the table, the
//! model line and the report out; one `error:` line and a non-zero exit for each kind of bad
//! profile.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use jitter_report::report::Report;

#[path = "../predict/tests/common/halo_profile.rs"]
mod halo_profile;

use halo_profile::profile;

fn write_trace(dir: &Path) -> PathBuf {
    let spec = "periodic:period=4ms,dur=400us".parse().unwrap();
    let t = jitter_trace::synth::synthesize(&spec, 1, 2_000_000_000, 3).unwrap();
    let p = dir.join("p4.jtr");
    jitter_trace::write_trace(&p, &t).unwrap();
    p
}

/// `replay-bench predict --app APP --trace TRACE` and `rest`.
fn run(app: &Path, trace: &Path, rest: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replay-bench"))
        .arg("predict")
        .arg("--app")
        .arg(app)
        .arg("--trace")
        .arg(trace)
        .args(rest)
        .output()
        .unwrap()
}

#[test]
fn predicts_a_profile_at_several_rank_counts_with_its_model_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let app = dir.path().join("app.json");
    profile(true, &[300_000.0]).write(&app).unwrap();
    let out = dir.path().join("r.json");
    let o = run(
        &app,
        &trace,
        &[
            "--ranks",
            "1,2,64",
            "--sync",
            "none,phase",
            "--phases",
            "100",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.starts_with("model: application "), "{stdout}");
    assert!(stdout.contains("ring offsets mod N"), "{stdout}");
    assert!(!stdout.contains("alltoall(v) round"), "{stdout}");
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r.results.len(), 6);
    let d = r.config.predict.as_ref().unwrap();
    assert_eq!(d.loop_shape, "application");
    // Noise-free: 0.8 ms of compute and three rounds of 2o + l (defaults o = l = 333 ns) per
    // iteration at 2 ranks (two Sendrecvs, a one-round allreduce).
    let two = r.results.iter().find(|x| x.ranks == 2).unwrap();
    // o and l are whole ns in virtual time (333 each).
    let round = 2.0 * d.logp_o_ns.round() + d.logp_l_ns.round();
    assert_eq!(two.baseline_avg_max_qtbt_ns, 800_000.0 + 3.0 * round);
    // 10 % of the time in detours: a rank alone loses about that; more ranks lose more.
    let one = r
        .results
        .iter()
        .find(|x| x.ranks == 1 && x.sync == "none")
        .unwrap();
    assert!(
        (5.0..20.0).contains(&one.sd_qtbt_pct),
        "{}",
        one.sd_qtbt_pct
    );
    let many = r
        .results
        .iter()
        .find(|x| x.ranks == 64 && x.sync == "none")
        .unwrap();
    assert!(many.sd_qtbt_pct > one.sd_qtbt_pct, "{many:?}");
}

#[test]
fn bad_profiles_give_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let no_loop = dir.path().join("no-loop.json");
    profile(false, &[300_000.0]).write(&no_loop).unwrap();
    let unknown = dir.path().join("unknown.json");
    let text = serde_json::to_string(&profile(true, &[300_000.0]))
        .unwrap()
        .replace("\"allreduce\"", "\"gatherv\"");
    std::fs::write(&unknown, text).unwrap();
    let missing = dir.path().join("missing.json");
    for (path, says) in [
        (&missing, "cannot read the profile"),
        (&no_loop, "no main loop found"),
        (&unknown, "unknown variant `gatherv`"),
    ] {
        let o = run(path, &trace, &["--ranks", "4"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{err}");
        assert!(o.stdout.is_empty());
    }
    // --app with a flag it replaces is refused by the parser.
    let o = run(&no_loop, &trace, &["--quanta", "1ms"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_loop_with_an_alltoall_says_what_its_pairwise_rounds_assume() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let app = dir.path().join("a2a.json");
    let mut p = profile(true, &[300_000.0]);
    let site = jitter_profile::Site {
        comm_size: 2,
        bytes: 64,
        ..jitter_profile::Site::of(jitter_profile::Call::Alltoall)
    };
    (p.main_loop.as_mut().unwrap().slots).push(halo_profile::slot(site, 100_000.0));
    p.write(&app).unwrap();
    let o = run(
        &app,
        &trace,
        &["--ranks", "4", "--sync", "none", "--phases", "50"],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("under sync none the ranks' detours add up along its N − 1 rounds"),
        "{stdout}"
    );
}
