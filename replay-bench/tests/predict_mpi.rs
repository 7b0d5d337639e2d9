//! `replay-bench predict` under `mpirun`: the simulated ranks are split over the processes and
//! the per-phase maxima reduced with MPI; every virtual rank draws from its own seeded
//! generator, so the split must reproduce the single-process prediction exactly.

use std::process::Command;

use jitter_report::report::Report;

const BIN: &str = env!("CARGO_BIN_EXE_replay-bench");

/// Runs `predict` with `flags` (and `-o`) in one process and split over two under the MPI
/// launcher; the two reports, after checking that rank 0 alone printed the table.
fn solo_and_split(dir: &std::path::Path, flags: &[String]) -> (Report, Report) {
    let args = |out: &std::path::Path| {
        let mut v = vec!["predict".to_string()];
        v.extend(flags.iter().cloned());
        v.extend(["-o".to_string(), out.display().to_string()]);
        v
    };
    let solo = dir.join("solo.json");
    let st = Command::new(BIN).args(args(&solo)).output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let split = dir.join("split.json");
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
    (Report::load(&solo).unwrap(), Report::load(&split).unwrap())
}

/// The rows of two reports are the same, exactly.
fn assert_same_rows(a: &Report, b: &Report) {
    assert_eq!(a.results.len(), b.results.len());
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

#[test]
fn a_prediction_split_over_two_processes_equals_the_single_process_one() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jtr");
    let spec = "periodic:period=4ms,dur=uniform:2us:4us,jitter=20us\
                +poisson:rate=300/s,dur=lognormal:5us:0.8+poisson:rate=2/s,dur=exp:200us";
    let t = jitter_trace::synth::synthesize(&spec.parse().unwrap(), 1, 10_000_000_000, 7).unwrap();
    jitter_trace::write_trace(&trace, &t).unwrap();
    let flags = [
        "--trace",
        &trace.display().to_string(),
        "--ranks",
        "1,3,64,1000",
        "--sync",
        "none,once,phase",
        "--phases",
        "300",
        "--seed",
        "11",
    ]
    .map(String::from);
    let (a, b) = solo_and_split(dir.path(), &flags);
    assert_eq!(a.results.len(), 12);
    assert_same_rows(&a, &b);
}

#[test]
fn a_node_trace_set_split_over_two_processes_equals_the_single_process_one() {
    // Three node traces of two streams, windows of different length: a process's share of
    // ranks starts inside a node group and the node groups cycle over the traces.
    let dir = tempfile::tempdir().unwrap();
    let mut set = Vec::new();
    for (i, (spec, s)) in [
        ("poisson:rate=300/s,dur=lognormal:5us:0.8", 10),
        ("periodic:period=4ms,dur=uniform:2us:40us,jitter=20us", 7),
        (
            "poisson:rate=2/s,dur=exp:200us+poisson:rate=100/s,dur=5us",
            9,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("node{i}.jtr"));
        let t = jitter_trace::synth::synthesize(&spec.parse().unwrap(), 2, s * 1_000_000_000, 5)
            .unwrap();
        jitter_trace::write_trace(&path, &t).unwrap();
        set.push(path.display().to_string());
    }
    let mut flags = vec!["--node-traces".to_string()];
    flags.extend(set);
    flags.extend(
        [
            "--ranks-per-node",
            "2",
            "--ranks",
            "3,63,1001",
            "--sync",
            "none,once,phase",
            "--phases",
            "200",
            "--seed",
            "11",
        ]
        .map(String::from),
    );
    let (a, b) = solo_and_split(dir.path(), &flags);
    assert_eq!(a.results.len(), 9);
    assert!(a.results.iter().all(|r| r.trace == "nodes(3)"));
    assert_same_rows(&a, &b);
}

#[test]
fn every_collective_algorithm_split_over_two_processes_equals_the_single_process_one() {
    // The send ends of each round travel to the processes of their receivers: shifts that wrap
    // around (dissemination), pairs and folds (recursive doubling at 3 and 1001 ranks, not
    // powers of two), trees (binomial), with a share boundary inside a node group.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jtr");
    let spec = "periodic:period=4ms,dur=uniform:2us:40us,jitter=20us+poisson:rate=3000/s,dur=lognormal:5us:0.8";
    let t = jitter_trace::synth::synthesize(&spec.parse().unwrap(), 2, 5_000_000_000, 3).unwrap();
    jitter_trace::write_trace(&trace, &t).unwrap();
    for (collective, shape) in [
        ("dissemination", "barrier-compute-barrier"),
        ("recursive-doubling", "compute-allreduce"),
        ("binomial-tree", "compute-barrier"),
    ] {
        let flags = [
            "--trace",
            &trace.display().to_string(),
            "--ranks-per-node",
            "2",
            "--ranks",
            "3,64,1001",
            "--sync",
            "none,phase",
            "--phases",
            "100",
            "--collective",
            collective,
            "--loop-shape",
            shape,
            "--seed",
            "5",
        ]
        .map(String::from);
        let (a, b) = solo_and_split(dir.path(), &flags);
        assert_eq!(a.results.len(), 6, "{collective}");
        assert_same_rows(&a, &b);
    }
}
