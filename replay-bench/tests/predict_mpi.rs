//! `replay-bench predict` under `mpirun`: the simulated ranks are split over the processes and
//! the per-phase maxima reduced with MPI; every virtual rank draws from its own seeded
//! generator, so the split must reproduce the single-process prediction exactly.

use std::process::Command;

use replay_bench::report::Report;

const BIN: &str = env!("CARGO_BIN_EXE_replay-bench");

#[test]
fn a_prediction_split_over_two_processes_equals_the_single_process_one() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jtr");
    let spec = "periodic:period=4ms,dur=uniform:2us:4us,jitter=20us\
                +poisson:rate=300/s,dur=lognormal:5us:0.8+poisson:rate=2/s,dur=exp:200us";
    let t = jitter_trace::synth::synthesize(&spec.parse().unwrap(), 1, 10_000_000_000, 7).unwrap();
    jitter_trace::write_trace(&trace, &t).unwrap();
    let args = |out: &std::path::Path| {
        vec![
            "predict".to_string(),
            "--trace".into(),
            trace.display().to_string(),
            "--ranks".into(),
            "1,3,64,1000".into(),
            "--sync".into(),
            "none,once,phase".into(),
            "--phases".into(),
            "300".into(),
            "--seed".into(),
            "11".into(),
            "-o".into(),
            out.display().to_string(),
        ]
    };
    let solo = dir.path().join("solo.json");
    let st = Command::new(BIN).args(args(&solo)).output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let split = dir.path().join("split.json");
    let launcher = ["mpirun", "mpiexec"]
        .into_iter()
        .find(|l| Command::new(l).arg("--version").output().is_ok())
        .expect("mpirun (or mpiexec) is not on PATH: install OpenMPI or MPICH (CI does)");
    let st = Command::new(launcher)
        .args(["-np", "2", BIN])
        .args(args(&split))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&st.stdout),
        String::from_utf8_lossy(&st.stderr)
    );
    // Rank 0 alone prints the table.
    let table = String::from_utf8_lossy(&st.stdout);
    assert_eq!(table.matches("SD eq.2").count(), 1, "{table}");
    let a = Report::load(&solo).unwrap();
    let b = Report::load(&split).unwrap();
    assert_eq!(a.results.len(), 12);
    for (x, y) in a.results.iter().zip(&b.results) {
        assert_eq!((x.ranks, &x.sync), (y.ranks, &y.sync));
        assert_eq!(
            x.avg_max_qt_ns, y.avg_max_qt_ns,
            "{} ranks {}",
            x.ranks, x.sync
        );
        assert_eq!(
            x.avg_max_qtbt_ns, y.avg_max_qtbt_ns,
            "{} ranks {}",
            x.ranks, x.sync
        );
        assert_eq!(x.lost_rel, y.lost_rel, "{} ranks {}", x.ranks, x.sync);
        assert_eq!(x.emulator, y.emulator, "{} ranks {}", x.ranks, x.sync);
    }
}
