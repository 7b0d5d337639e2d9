//! `libjitter_preload.so` under bindings that call the `PMPI_` names: a Fortran ring
//! (`tests/app/ring.F90`, OpenMPI's Fortran binding calls `PMPI_Sendrecv`, `PMPI_Allreduce`,
//! `PMPI_Init`, …), built with `mpif90` through the `mpi` module and through `mpif.h`; and a C
//! program whose every `MPI_Send` enters the library three times (`tests/app/sends.c` beside
//! `tests/app/reenter.c`, a PMPI layer whose `PMPI_Send` calls `PMPI_Isend` and `PMPI_Wait`).
//!
//! The closed forms: the profile's loop is the ring's (a `Sendrecv` to +1 from −1 of 1 KiB and
//! an `Allreduce` of 8 bytes, as many iterations as the program made); paying at calls, each
//! rank's calls are exactly the program's (`mpi_comm_rank`, `mpi_comm_size` and two per
//! iteration) and every detour of the plan is paid; a call that passes through several
//! wrappers is recorded and counted once (the outermost wrapper acts).
//!
//! Skips, saying why in one line, without `mpif90` (the Fortran tests) or `mpicc`. Every
//! `mpirun` has a time limit (`timeout`).

mod common;

use std::path::{Path, PathBuf};

use jitter_profile::{Call, Profile, Site};

const ITERS: u64 = 200;
/// Work iterations of the ring's compute (≈ 0.4 ms each on the test VM: the loop holds far
/// more than half the compute even when a busy machine preempts a rank outside it).
const WORK: u64 = 200_000;
const LIMIT_S: u32 = 120;

/// The ring built with `mpif90`: through the `mpi` module, or `mpif.h` with `header`.
fn ring(dir: &Path, header: bool) -> PathBuf {
    let (flags, out): (&[&str], _) = if header {
        (&["-DMPIF_H"], "ring_mpif_h")
    } else {
        (&[], "ring_use_mpi")
    };
    common::compile_with(dir, "mpif90", flags, "ring.F90", out)
}

fn run(dir: &Path, app: &Path, vars: &[(&str, &str)], args: &[String]) -> String {
    let out = common::mpirun(dir, 2, LIMIT_S, true, vars, app, args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}{stderr}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

fn ring_args() -> Vec<String> {
    vec![ITERS.to_string(), WORK.to_string()]
}

/// The ring's profile: its loop, call by call, with its peers and bytes.
fn check_ring_profile(header: bool) {
    if !common::have_fortran() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let app = ring(dir.path(), header);
    let profile = dir.path().join("app.json");
    let vars = [("JITTER_PROFILE", profile.to_str().unwrap())];
    let stdout = run(dir.path(), &app, &vars, &ring_args());
    assert!(stdout.contains(&format!("fring iterations {ITERS} bad 0")));
    let p = Profile::read(&profile).unwrap();
    println!("{}", jitter_profile::show::render(&p, "app.json"));
    assert_eq!((p.ranks, p.reported.len()), (2, 2), "{p:?}");
    let l = p.main_loop.as_ref().expect("the ring's loop");
    assert_eq!((l.iterations, l.ranks.clone()), (ITERS, vec![0, 1]));
    let sites: Vec<Site> = l.slots.iter().map(|s| s.site).collect();
    let sendrecv = Site {
        comm_size: 2,
        bytes: 128 * 8,
        peer: 1,
        root: 1,
        ..Site::of(Call::Sendrecv)
    };
    let allreduce = Site {
        comm_size: 2,
        bytes: 8,
        ..Site::of(Call::Allreduce)
    };
    assert_eq!(sites, vec![sendrecv, allreduce]);
    // Every call of every rank: the loop's and the end (`MPI_Finalize`).
    for r in &p.reported {
        assert_eq!(r.calls, 2 * ITERS + 1, "{r:?}");
    }
}

#[test]
fn a_fortran_ring_through_the_mpi_module_is_profiled_call_by_call() {
    check_ring_profile(false);
}

#[test]
fn a_fortran_ring_through_mpif_h_is_profiled_call_by_call() {
    check_ring_profile(true);
}

/// A dense periodic trace (a 20 µs detour every 100 µs) of `seconds`.
fn dense_trace(dir: &Path, seconds: u64) -> PathBuf {
    common::periodic_trace(&dir.join("dense.jtr"), 100_000, 20_000, seconds * 10_000)
}

#[test]
fn a_fortran_ring_pays_every_detour_of_the_plan_at_its_calls() {
    if !common::have_fortran() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let app = ring(dir.path(), false);
    let trace = dense_trace(dir.path(), 60);
    let stats_dir = dir.path().join("stats");
    let vars = [
        ("JITTER_TRACE", trace.to_str().unwrap()),
        ("JITTER_INJECT", "boundary"),
        ("JITTER_SYNC", "none"),
        ("JITTER_STATS_DIR", stats_dir.to_str().unwrap()),
    ];
    let stdout = run(dir.path(), &app, &vars, &ring_args());
    assert!(stdout.contains(&format!("fring iterations {ITERS} bad 0")));
    for r in 0..2 {
        let rank = common::rank_stats(&stats_dir, r);
        let b = rank.boundary.expect("the rank's account");
        let l = &b.ledger;
        // mpi_comm_rank, mpi_comm_size, a sendrecv and an allreduce per iteration, then
        // mpi_finalize (a boundary: it pays what the stretch before it owes).
        assert_eq!(b.calls.calls, 3 + 2 * ITERS, "rank {r}: {b:?}");
        // Every detour met is paid (a stop can miss only the one that fell due while the last
        // call settled), at calls' entries and inside the polled calls.
        assert!(l.missed.injections <= 1, "rank {r}: {l:?}");
        assert!(l.detour_share() >= 0.99, "rank {r}: {l:?}");
        let paid = l.paid().injections;
        let due = rank.injector.elapsed_ns / 100_000;
        assert!(
            paid + 2 >= due && paid <= due + 2,
            "rank {r}: paid {paid}, due {due}"
        );
        assert!(
            l.at_boundary.injections > 0 && l.in_call.injections > 0,
            "rank {r}: {l:?}"
        );
    }
}

#[test]
fn a_call_that_passes_through_three_wrappers_is_recorded_and_paid_once() {
    if !common::have_mpi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let app = common::compile_with(d, "mpicc", &[], "sends.c", "sends");
    let layer = common::compile_with(d, "mpicc", &["-shared", "-fPIC"], "reenter.c", "reenter.so");
    let preload = format!("{}:{}", common::library().display(), layer.display());
    let profile = d.join("app.json");
    let trace = dense_trace(d, 60);
    let stats_dir = d.join("stats");
    let vars = [
        ("LD_PRELOAD", preload.as_str()),
        ("JITTER_PROFILE", profile.to_str().unwrap()),
        ("JITTER_TRACE", trace.to_str().unwrap()),
        ("JITTER_INJECT", "boundary"),
        ("JITTER_SYNC", "none"),
        ("JITTER_STATS_DIR", stats_dir.to_str().unwrap()),
    ];
    let stdout = run(d, &app, &vars, &ring_args());
    assert!(stdout.contains(&format!("sends {ITERS} bad 0")));
    let p = Profile::read(&profile).unwrap();
    println!("{}", jitter_profile::show::render(&p, "app.json"));
    let l = p.main_loop.as_ref().expect("the loop");
    let calls: Vec<Call> = l.slots.iter().map(|s| s.site.call).collect();
    assert_eq!(calls, vec![Call::Send, Call::Recv]);
    assert_eq!(l.iterations, ITERS);
    for r in &p.reported {
        // A send and a receive per iteration, and the end.
        assert_eq!(r.calls, 2 * ITERS + 1, "{r:?}");
    }
    for r in 0..2 {
        let b = common::rank_stats(&stats_dir, r)
            .boundary
            .expect("the rank's account");
        // MPI_Comm_rank, MPI_Comm_size, a send and a receive per iteration, MPI_Finalize.
        assert_eq!(b.calls.calls, 3 + 2 * ITERS, "rank {r}: {b:?}");
    }
}
