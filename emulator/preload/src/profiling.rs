//! `JITTER_PROFILE=app.json`: the application profile, recorded on the thread that called
//! `MPI_Init` (needs no trace; runs beside a replay when both are set).
//!
//! Before `PMPI_Init` each rank creates its record `app.json.ranks/rank-<r>.prof`, a file mapped
//! into the process (`jitter_profile::record`): from then on every profiled call is a few stores
//! into that mapping, so what a rank recorded stays in its file if it dies. At `MPI_Finalize`
//! each rank marks its record finished; rank 0, after `PMPI_Finalize`, merges the job's records
//! into `app.json` (waiting up to [`crate::SUMMARY_WAIT`] for the others). A job whose rank 0
//! died leaves the folder: `replay-bench profile show app.json.ranks` merges it.
//!
//! Hot path ([`around`]): one relaxed load when not profiling; when profiling, two counter
//! reads, the call's `PMPI_Type_size`/`PMPI_Comm_size`/`PMPI_Comm_rank` where its site needs
//! them, a thread-local borrow flag (no lock) and the record's stores; nothing allocates.
//! Only the outermost wrapper of a thread calls it ([`crate::nesting`]): calls the MPI library
//! makes to `MPI_`/`PMPI_` functions from inside a profiled call are forwarded without being
//! recorded (they are part of the outer call).

use std::cell::RefCell;
use std::ffi::c_int;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use jitter_collect::clock::read_counter;
use jitter_profile::profile::{rank_path, ranks_dir};
use jitter_profile::{Call, Identity, Profile, RankRecord, Recorder, Site};
use jitter_trace::output::{check_output, check_room};

use crate::config::{profile_path, Layout};

/// Set once a rank records: the wrappers' quick test.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The profile of this process, once it records.
struct Job {
    path: PathBuf,
    layout: Layout,
}

static JOB: OnceLock<Job> = OnceLock::new();

thread_local! {
    /// The record, on the thread that called `MPI_Init`.
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Everything decided before `PMPI_Init`: the record exists.
pub(crate) struct Prepared {
    recorder: Recorder,
    job: Job,
}

/// Reads `JITTER_PROFILE` and creates this rank's record (`None`: no profile).
pub(crate) fn prepare(
    get: impl Fn(&str) -> Option<String> + Copy,
) -> Result<Option<Prepared>, String> {
    let Some(path) = profile_path(get)? else {
        return Ok(None);
    };
    let (host, _) = jitter_emulator::calibration::host_and_kernel();
    let layout = Layout::from_vars(get, &host)?;
    let dir = ranks_dir(&path);
    let refused = |e: jitter_trace::TraceError| jitter_trace::error::chain_line(&e);
    check_output(&path, "JITTER_PROFILE", "a JSON profile", &["json"]).map_err(refused)?;
    if layout.rank == 0 {
        check_room_for_job(&path, layout.size).map_err(refused)?;
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("JITTER_PROFILE: cannot create {}: {e}", dir.display()))?;
    let clock = crate::boot_frequency::clock()?;
    let id = Identity {
        rank: layout.rank,
        ranks: layout.size,
        khz: clock.khz(),
        job: layout.job.clone(),
        host: layout.host.clone(),
        program: std::env::args().next().unwrap_or_default(),
    };
    let file = rank_path(&dir, layout.rank);
    let recorder = Recorder::create(&file, &id, read_counter()).map_err(|e| {
        let why = jitter_trace::error::chain_line(&e);
        if why.contains(&*file.to_string_lossy()) {
            format!("JITTER_PROFILE={}: {why}", path.display())
        } else {
            format!(
                "JITTER_PROFILE: cannot record into {}: {why}",
                file.display()
            )
        }
    })?;
    Ok(Some(Prepared {
        recorder,
        job: Job { path, layout },
    }))
}

/// Room the merged profile file may need beside the records: a fixed part and a part per rank
/// (a written profile holds about 250 bytes per rank and a few kB per slot of its loop).
const PROFILE_BYTES: u64 = 1 << 20;
const PROFILE_BYTES_PER_RANK: u64 = 1 << 10;

/// Rank 0, before any rank's record is reserved or while they are: refuses a profile folder
/// whose file system cannot hold every rank's record and the merged profile. The records of
/// this folder already there (of this job, reserved meanwhile, or of an earlier one, which
/// their ranks truncate) count as room, so the answer does not depend on which rank came
/// first. Each rank then reserves its own record (`Recorder::create`).
fn check_room_for_job(path: &std::path::Path, ranks: u64) -> Result<(), jitter_trace::TraceError> {
    use std::os::unix::fs::MetadataExt;
    let dir = ranks_dir(path);
    let record = std::mem::size_of::<RankRecord>() as u64;
    let held: u64 = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("rank-")
                .and_then(|n| n.strip_suffix(".prof"))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|r| r < ranks)
        })
        .filter_map(|e| e.metadata().ok())
        .map(|m| (m.blocks() * 512).min(record))
        .sum();
    let need = ranks
        .saturating_mul(record + PROFILE_BYTES_PER_RANK)
        .saturating_add(PROFILE_BYTES);
    let records = if ranks == 1 {
        "the record of 1 rank".to_string()
    } else {
        format!("the records of {ranks} ranks")
    };
    let what = format!(
        "JITTER_PROFILE={} ({records}, {} each, and the profile)",
        path.display(),
        jitter_trace::output::bytes_shown(record)
    );
    // The records' folder, or before it exists the profile's (which holds it).
    let folder = if dir.is_dir() {
        dir.clone()
    } else {
        profile_folder(path)
    };
    check_room(&folder, &what, need, record, held)
}

/// The folder the profile file is written in.
fn profile_folder(path: &std::path::Path) -> std::path::PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => ".".into(),
    }
}

/// Starts recording on this thread (after `PMPI_Init`): compute is counted from now.
pub(crate) fn start(mut p: Prepared) -> Result<(), String> {
    p.recorder.record().header.last_exit = read_counter();
    RECORDER.with(|r| *r.borrow_mut() = Some(p.recorder));
    JOB.set(p.job)
        .map_err(|_| "MPI_Init was called twice".to_string())?;
    ACTIVE.store(true, Ordering::Release);
    Ok(())
}

/// Runs the MPI call `call`, recording it at the site `site` gives (computed after the call);
/// called from the thread's outermost wrapper only. A test or probe that completed or found
/// nothing gives no site and is not recorded: a poll, whose time counts as the compute before
/// the rank's next call.
#[inline]
pub(crate) fn around<S: Into<Option<Site>>>(
    site: impl FnOnce() -> S,
    call: impl FnOnce() -> c_int,
) -> c_int {
    if !ACTIVE.load(Ordering::Relaxed) {
        return call();
    }
    let enter = read_counter();
    let rc = call();
    let exit = read_counter();
    RECORDER.with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            if let Some(r) = r.as_mut() {
                if let Some(site) = site().into() {
                    r.record().record(&site, enter, exit);
                }
            }
        }
    });
    rc
}

/// Records how `MPI_Init` went (counters: the wrapper's start, `PMPI_Init`'s start and end, the
/// wrapper's end, after the replay started); the program's compute is counted from its end.
pub(crate) fn set_init(enter: u64, pmpi: (u64, u64), exit: u64) {
    RECORDER.with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            if let Some(r) = r.as_mut() {
                let rec = r.record();
                rec.set_init(enter, pmpi, exit);
                rec.header.last_exit = exit;
            }
        }
    });
}

/// Records the Cartesian topology the program made.
pub(crate) fn cartesian(dims: &[i32], periods: &[i32]) {
    RECORDER.with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            if let Some(r) = r.as_mut() {
                r.record().set_cartesian(dims, periods);
            }
        }
    });
}

/// At `MPI_Finalize`, before `PMPI_Finalize`: the compute since the last call, and the record
/// marked finished.
pub(crate) fn finish() {
    if !ACTIVE.swap(false, Ordering::AcqRel) {
        return;
    }
    RECORDER.with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            if let Some(r) = r.as_mut() {
                let now = read_counter();
                r.record().record(&Site::of(Call::Finalize), now, now);
                r.finish();
            }
        }
    });
}

/// Rank 0, after `PMPI_Finalize`: merges the records into the profile file; the line to print.
pub(crate) fn merge() -> Option<Result<String, String>> {
    let job = JOB.get().filter(|j| j.layout.rank == 0)?;
    let dir = ranks_dir(&job.path);
    let shown = job.path.display();
    Some(
        Profile::collect(
            &dir,
            job.layout.size,
            Some(&job.layout.job),
            crate::SUMMARY_WAIT,
        )
        .and_then(|p| p.write(&job.path).map(|()| p))
        .map(|p| {
            let main = p.main_loop.as_ref().map_or_else(
                || "no main loop found".to_string(),
                |l| {
                    let kinds = p.structure.as_ref().map_or(1, |s| s.variants.len());
                    format!(
                        "main loop of {} calls × {} iterations ({kinds} kinds of iteration)",
                        l.slots.len(),
                        l.iterations
                    )
                },
            );
            format!(
                "profile {shown}: {} of {} ranks, {main} (replay-bench profile show {shown})",
                p.reported.len(),
                p.ranks
            )
        })
        .map_err(|e| {
            format!(
                "JITTER_PROFILE={shown}: {}; the ranks' records are kept in {}: replay-bench \
                 profile show {} merges them",
                jitter_trace::error::chain_line(&e),
                dir.display(),
                dir.display()
            )
        }),
    )
}
