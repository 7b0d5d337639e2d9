//! What the MPI tests of `replay-bench` share: finding the launcher, the preload library and
//! tools, and running under the launcher with a time limit.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The replay-bench binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_replay-bench");

/// What one `mpirun` did.
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub secs: f64,
}

/// The MPI launcher on PATH (`mpirun`, else `mpiexec`).
pub fn mpirun() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["mpirun", "mpiexec"] {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "mpirun (or mpiexec) is not on PATH: these tests run replay-bench under a real MPI \
         launcher; install OpenMPI or MPICH (CI does)"
    );
}

/// Starts `mpirun ARGS` with its output piped.
pub fn launch(args: &[&str]) -> std::process::Child {
    Command::new(mpirun())
        .args(args)
        // OpenMPI refuses root and oversubscription without these; MPICH ignores them.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start mpirun")
}

/// Runs `mpirun -np np replay-bench run ARGS`, killed after `limit`.
pub fn run(np: u32, args: &[&str], limit: Duration) -> Ran {
    let t0 = Instant::now();
    let mut child = launch(&[&["-np", &np.to_string(), BIN, "run"], args].concat());
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if t0.elapsed() > limit {
            // SIGTERM first: mpirun forwards it to its ranks (SIGKILL would orphan them).
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(3));
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "mpirun -np {np} run {args:?} did not finish within {limit:?} (a rank hung?)\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("wait");
    Ran {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        secs: t0.elapsed().as_secs_f64(),
    }
}

/// Whether `tool` is on PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `libjitter_preload.so` as `cargo test` built it (the newer of `target/<profile>` and its
/// `deps`; a dev-dependency of this crate).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.parent().unwrap(), deps]
        .iter()
        .map(|d| d.join("libjitter_preload.so"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p)
        .expect("libjitter_preload.so is built with replay-bench's tests (a dev-dependency)")
}

/// The line a test prints instead of its checks when `replay-bench run` refused its result
/// because other work on the CPUs swamped the measurement (the run's plausibility check: the
/// product is right to refuse on such a machine, and says by how much); None otherwise.
pub fn swamped(r: &Ran) -> Option<String> {
    let refusal = r.stderr.lines().find(|l| {
        l.contains("implausible result:") && l.contains("other work on these CPUs swamped")
    })?;
    Some(format!(
        "NOT CHECKED: the run refused its result, as it must on a machine this busy: {}",
        refusal.trim_start_matches("error: ")
    ))
}
