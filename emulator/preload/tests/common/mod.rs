//! What the MPI test files share: finding the tools and the library, building a C program.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `mpicc` and `mpirun` are there; otherwise says why the test is skipped.
pub fn have_mpi() -> bool {
    let ok = have("mpicc") && have("mpirun");
    if !ok {
        println!("skipped: mpicc or mpirun is not installed (scripts/setup.sh installs OpenMPI)");
    }
    ok
}

/// `libjitter_preload.so` next to this test's executable (`target/<profile>/deps/..`): the newer
/// of the two (`cargo test` updates only the one in `deps`).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.parent().unwrap(), deps]
        .iter()
        .map(|d| d.join("libjitter_preload.so"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p)
        .expect("libjitter_preload.so is built with the crate's tests")
}

/// Builds `tests/app/<name>.c` with `mpicc` into `dir/<name>`.
pub fn compile(dir: &Path, name: &str) -> PathBuf {
    compile_with(dir, "mpicc", &[], &format!("{name}.c"), name)
}

/// `timeout -k 10 LIMIT mpirun -np N --bind-to none APP ARGS` in `dir`, with the library
/// preloaded when `preload`, every `JITTER_*` cleared and then `vars` set.
pub fn mpirun(
    dir: &Path,
    np: u32,
    limit_s: u32,
    preload: bool,
    vars: &[(&str, &str)],
    app: &Path,
    args: &[String],
) -> Command {
    let mut c = Command::new("timeout");
    c.args([
        "-k",
        "10",
        &limit_s.to_string(),
        "mpirun",
        "-np",
        &np.to_string(),
        "--bind-to",
        "none",
    ])
    .arg(app)
    .args(args)
    .current_dir(dir)
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .env("OMPI_MCA_btl", "self,vader,tcp")
    .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    .env_remove("OMPI_MCA_orte_abort_on_non_zero_status")
    .env_remove("LD_PRELOAD");
    for v in jitter_preload::config::VARIABLES {
        c.env_remove(v);
    }
    if preload {
        c.env("LD_PRELOAD", library());
    }
    c.envs(vars.iter().copied());
    c
}

/// `mpif90` is there; otherwise says, in one line, why the test is skipped.
pub fn have_fortran() -> bool {
    let ok = have("mpif90") && have("mpirun");
    if !ok {
        println!(
            "skipped: mpif90 or mpirun is not installed (scripts/setup.sh installs gfortran and \
             OpenMPI's Fortran bindings)"
        );
    }
    ok
}

/// Builds `tests/app/<file>` with `compiler` and `flags` into `dir/<out>`.
pub fn compile_with(dir: &Path, compiler: &str, flags: &[&str], file: &str, out: &str) -> PathBuf {
    let app = dir.join(out);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/app/{file}"));
    let out = Command::new("timeout")
        .args(["60", compiler, "-O2"])
        .args(flags)
        .arg("-o")
        .arg(&app)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{compiler}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    app
}

/// Writes `path`: a one-stream trace of `count` detours of `detour_ns` every `period_ns`.
pub fn periodic_trace(path: &Path, period_ns: u64, detour_ns: u64, count: u64) -> PathBuf {
    let stream = jitter_emulator::calibration::periodic_stream(period_ns, detour_ns, count);
    let mut t = jitter_trace::Trace {
        streams: vec![stream],
        ..jitter_trace::Trace::default()
    };
    t.sync_header();
    jitter_trace::write_trace(path, &t).unwrap();
    path.to_path_buf()
}

/// Rank `r`'s statistics file in `stats_dir`.
pub fn rank_stats(stats_dir: &Path, r: u64) -> jitter_preload::rank_files::RankStats {
    let p = jitter_preload::rank_files::rank_path(stats_dir, r);
    let s = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
