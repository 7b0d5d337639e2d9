//! The job's profile (`JITTER_PROFILE=app.json`): what the ranks did between and in their MPI
//! calls, merged from the rank records, and its file.
//!
//! Each rank's main loop is found in its sequence of call shapes (`structure`, `sequence`); the
//! lowest rank with a loop is the reference, and every rank whose loop body is the same sequence
//! of shapes (rotated to start where the reference's starts) adds its compute intervals to the
//! loop's slots. Slot j's interval is the compute before the body's j-th call at each iteration
//! of the body, read from the record's counters position by position (`shared` is never set:
//! positions are told apart exactly). Iterations of other variants (work every k steps, output
//! every m) are described in `structure`; where the body's iterations hold under
//! [`structure::BODY_STANDS_FOR_ALL`] of the loop's compute, each other variant's calls are kept
//! too (`kinds`, from the reference rank) with the iterations' order, so that a prediction
//! replays every iteration as its kind. Ranks whose loop differs (a boundary
//! rank that sends to no one) are listed and left out of the slots. Records of ranks that died
//! are merged as they were when they died, marked `finished: false`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::ProfileError;
use crate::histogram::{Distribution, LogHistogram};
use crate::record::{RankRecord, FINISHED};
use crate::sequence::rotation;
use crate::site::Site;
use crate::structure::{self, rank_loop, LoopStructure, RankLoop, RankTiming};

/// The value of the file's `format` field.
pub const FORMAT: &str = "jitterbench-profile";
/// The file's version: 3 names the waits, tests and probes beyond `Wait`/`Waitall` (`Call`
/// 16–26); 4 adds the main loop's other kinds of iteration (`kinds`, `order`). An older file
/// is a version-4 file without them and reads as one (every iteration is the body).
pub const VERSION: u32 = 4;
/// The oldest version read.
const OLDEST: u32 = 2;

/// The folder of the rank records of the profile `path`: `<path>.ranks`.
pub fn ranks_dir(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".ranks");
    PathBuf::from(s)
}

/// Rank `r`'s record in `dir`.
pub fn rank_path(dir: &Path, rank: u64) -> PathBuf {
    dir.join(format!("rank-{rank}.prof"))
}

/// The Cartesian topology the program made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cartesian {
    /// Ranks per dimension.
    pub dims: Vec<i32>,
    /// Periodic dimensions.
    pub periods: Vec<bool>,
}

/// One rank as the profile saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSummary {
    /// Rank.
    pub rank: u64,
    /// Host.
    pub host: String,
    /// Reached `MPI_Finalize` (false: it died, or is still running, with what it recorded).
    pub finished: bool,
    /// MPI calls recorded.
    pub calls: u64,
    /// Σ compute between calls, ns.
    pub compute_ns: u64,
    /// Σ time in calls, ns.
    pub mpi_ns: u64,
    /// Calls per iteration of its own main loop (`None`: no loop found).
    pub loop_period: Option<usize>,
    /// Its loop is the job's (its intervals are in the slots).
    pub in_main_loop: bool,
    /// Calls at sites or steps beyond the record's tables (not told apart).
    pub overflow_calls: u64,
    /// Of them, calls at sites beyond the site table: their shapes are unknown to the loop
    /// search (the others lack only their step's histogram).
    #[serde(default)]
    pub unknown_sites: u64,
    /// Its `MPI_Init` and its loop's time.
    #[serde(default)]
    pub timing: Option<RankTiming>,
}

/// One call of the main loop and the compute before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    /// The call.
    pub site: Site,
    /// The compute interval before it over the loop's ranks and iterations.
    pub compute: Distribution,
    /// Mean time in the call, ns (as measured: it includes waiting for other ranks).
    pub call_mean_ns: f64,
    /// The step of this slot occurs at another slot too: the distribution is both slots'.
    pub shared: bool,
}

impl Slot {
    /// A slot of a synthetic profile: `site` after a compute of `compute_ns` every time (ten
    /// samples of that length), no time in the call, not shared; `None` where the histogram
    /// gives no distribution.
    pub fn constant(site: Site, compute_ns: f64) -> Option<Slot> {
        let mut h = LogHistogram::default();
        h.add(compute_ns as u64, 10);
        Some(Slot {
            site,
            compute: Distribution::of(&h, compute_ns)?,
            call_mean_ns: 0.0,
            shared: false,
        })
    }
}

/// The repeating sequence of calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MainLoop {
    /// Iterations of the reference rank (calls at the loop's sites ÷ their occurrences in an
    /// iteration, the smallest over the sites).
    pub iterations: u64,
    /// Ranks whose loop this is.
    pub ranks: Vec<u64>,
    /// The calls of one iteration, in order.
    pub slots: Vec<Slot>,
    /// Share of the reference rank's compute time inside the loop.
    pub compute_share: f64,
    /// The loop's other kinds of iteration (its variants: work every k steps, a longer step),
    /// each with its calls, the most frequent first; empty where every iteration is the body.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<Kind>,
    /// The reference rank's iterations in their order, as runs of one kind: (kind, iterations),
    /// kind 0 the body and k ≥ 1 `kinds[k - 1]`; empty where every iteration is the body.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<(u32, u64)>,
}

/// A kind of iteration other than the body: its calls, each with the compute before it over
/// the reference rank's iterations of this kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kind {
    /// The calls of one iteration of this kind, in order.
    pub slots: Vec<Slot>,
    /// Iterations of this kind (of the reference rank).
    pub iterations: u64,
}

impl MainLoop {
    /// The kind of each of the reference rank's iterations in order (0: the body), or `None`
    /// where every iteration is the body.
    pub fn kinds_in_order(&self) -> Option<Vec<u32>> {
        if self.kinds.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        for &(k, n) in &self.order {
            out.extend(std::iter::repeat_n(k, n as usize));
        }
        Some(out)
    }

    /// Compute per iteration, ns: the body's slot means summed, or with other kinds the mean
    /// over the recorded iterations of each one's sum.
    pub fn mean_compute_ns(&self) -> f64 {
        let sum = |slots: &[Slot]| slots.iter().map(|s| s.compute.mean_ns).sum::<f64>();
        if self.kinds.is_empty() {
            return sum(&self.slots);
        }
        let (mut total, mut n) = (0.0, 0u64);
        for &(k, m) in &self.order {
            let slots = match k {
                0 => &self.slots,
                k => &self.kinds[k as usize - 1].slots,
            };
            total += sum(slots) * m as f64;
            n += m;
        }
        total / n.max(1) as f64
    }
}

/// A job's profile: the file `JITTER_PROFILE` names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The program (`argv[0]` of rank 0).
    pub program: String,
    /// The launcher's job id.
    pub job: String,
    /// Ranks of the job.
    pub ranks: u64,
    /// The ranks whose records were found.
    pub reported: Vec<RankSummary>,
    /// Ranks without a record.
    pub missing: Vec<u64>,
    /// The Cartesian topology, if the program made one.
    pub cartesian: Option<Cartesian>,
    /// The main loop, if one was found.
    pub main_loop: Option<MainLoop>,
    /// What the main loop is made of (variants, set-up, output, coverage), if one was found.
    #[serde(default)]
    pub structure: Option<LoopStructure>,
}

fn summary(r: &RankRecord, l: Option<&RankLoop>, in_loop: bool) -> RankSummary {
    let h = &r.header;
    RankSummary {
        rank: h.rank,
        host: r.host(),
        finished: h.state == FINISHED,
        calls: h.calls,
        compute_ns: r.ns(h.compute_ticks),
        mpi_ns: r.ns(h.call_ticks),
        loop_period: l.map(|l| l.found.body_len()),
        in_main_loop: in_loop,
        overflow_calls: h.site_overflow + h.step_overflow,
        unknown_sites: h.site_overflow,
        timing: Some(structure::timing(r, l)),
    }
}

/// The main loop of the reference rank `ri` with the slots of every member rank (those whose
/// body is the reference's, rotated), and the loop's structure.
fn main_loop_of(
    records: &[Box<RankRecord>],
    loops: &[Option<RankLoop>],
    ri: usize,
    members: &mut [bool],
) -> Option<(MainLoop, LoopStructure)> {
    let refl = loops[ri].as_ref()?;
    let p = refl.body.len();
    let mut hists = vec![LogHistogram::default(); p];
    let mut sums = vec![(0u64, 0f64, 0f64); p]; // count, Σ compute ns, Σ call ns
    for (i, (r, l)) in records.iter().zip(loops).enumerate() {
        let Some(l) = l else { continue };
        let Some(rot) = rotation(&l.body, &refl.body) else {
            continue;
        };
        members[i] = true;
        structure::add_samples(r, l, (0, rot), &mut hists, &mut sums);
    }
    let r = &records[ri];
    let (sites, vary) = structure::sites_of(r, refl, 0)?;
    let slots = slots_of(&sites, &hists, &sums)?;
    let described = structure::describe(r, refl, vary);
    let (kinds, order) = if described.kinds_replayed {
        kinds_of(r, refl)?
    } else {
        (Vec::new(), Vec::new())
    };
    let main = MainLoop {
        iterations: described.iterations,
        ranks: records
            .iter()
            .zip(members.iter())
            .filter(|(_, m)| **m)
            .map(|(r, _)| r.header.rank)
            .collect(),
        slots,
        compute_share: described.compute_share,
        kinds,
        order,
    };
    Some((main, described))
}

/// The reference rank's other kinds of iteration (those [`structure::kept_kinds`] keeps) with
/// their slots, and its iterations' order as runs (iterations of kinds left out are not in it).
type Kinds = (Vec<Kind>, Vec<(u32, u64)>);

fn kinds_of(r: &RankRecord, l: &RankLoop) -> Option<Kinds> {
    let kept = structure::kept_kinds(&l.found);
    let mut kinds = Vec::with_capacity(kept);
    for v in 1..=kept {
        let p = l.found.variants[v].1;
        let mut hists = vec![LogHistogram::default(); p];
        let mut sums = vec![(0u64, 0f64, 0f64); p];
        structure::add_samples(r, l, (v, 0), &mut hists, &mut sums);
        let (sites, _) = structure::sites_of(r, l, v)?;
        let slots = slots_of(&sites, &hists, &sums)?;
        kinds.push(Kind {
            slots,
            iterations: l.found.count(v) as u64,
        });
    }
    let mut order: Vec<(u32, u64)> = Vec::new();
    if kept > 0 {
        for &(_, v) in l.found.iterations.iter().filter(|(_, v)| *v <= kept) {
            match order.last_mut() {
                Some((k, n)) if *k == v as u32 => *n += 1,
                _ => order.push((v as u32, 1)),
            }
        }
    }
    Some((kinds, order))
}

/// Slots of `sites` from their samples: (count, Σ compute ns, Σ call ns) and histograms.
fn slots_of(sites: &[Site], hists: &[LogHistogram], sums: &[(u64, f64, f64)]) -> Option<Vec<Slot>> {
    (0..sites.len())
        .map(|j| {
            let (count, compute, call) = sums[j];
            Some(Slot {
                site: sites[j],
                compute: Distribution::of(&hists[j], compute / count.max(1) as f64)?,
                call_mean_ns: call / count.max(1) as f64,
                shared: false,
            })
        })
        .collect()
}

/// The recorded sequence of `r` as a loop of one iteration (no loop holds most of the compute).
fn recorded_loop(r: &RankRecord) -> Option<(MainLoop, LoopStructure)> {
    let (calls, st) = structure::recorded(r)?;
    let slots = (calls.into_iter())
        .map(|(site, compute_ns, call_ns)| {
            let mut h = LogHistogram::default();
            h.add(compute_ns, 1);
            Some(Slot {
                site,
                compute: Distribution::of(&h, compute_ns as f64)?,
                call_mean_ns: call_ns as f64,
                shared: false,
            })
        })
        .collect::<Option<Vec<Slot>>>()?;
    let main = MainLoop {
        iterations: 1,
        ranks: vec![r.header.rank],
        slots,
        compute_share: 1.0,
        kinds: Vec::new(),
        order: Vec::new(),
    };
    Some((main, st))
}

impl Profile {
    /// Merges the records of one job (`ranks` ranks; those not given are `missing`).
    pub fn merge(records: &[Box<RankRecord>], ranks: u64) -> Profile {
        let loops: Vec<Option<RankLoop>> = records.iter().map(|r| rank_loop(r)).collect();
        let mut members = vec![false; records.len()];
        let found = loops
            .iter()
            .position(Option::is_some)
            .and_then(|ri| main_loop_of(records, &loops, ri, &mut members))
            .filter(|(_, s)| s.compute_share >= structure::MIN_LOOP_COMPUTE_SHARE);
        let (main, structure, recorded) = match found {
            Some((m, s)) => (Some(m), Some(s), false),
            None => match records.first().and_then(|r| recorded_loop(r)) {
                Some((m, s)) => (Some(m), Some(s), true),
                None => (None, None, false),
            },
        };
        let reported: Vec<RankSummary> = records
            .iter()
            .zip(&loops)
            .zip(&members)
            .map(|((r, l), m)| {
                let mut s = summary(r, l.as_ref(), *m && main.is_some() && !recorded);
                if recorded {
                    s.in_main_loop = r.header.rank == records[0].header.rank;
                    s.timing = Some(structure::recorded_timing(r));
                }
                s
            })
            .collect();
        let first = records.first();
        let cartesian = records.iter().find(|r| r.header.cart_ndims > 0).map(|r| {
            let n = (r.header.cart_ndims as usize).min(8);
            Cartesian {
                dims: r.header.cart_dims[..n].to_vec(),
                periods: r.header.cart_periods[..n].iter().map(|&p| p != 0).collect(),
            }
        });
        Profile {
            format: FORMAT.into(),
            version: VERSION,
            program: first.map(|r| r.program()).unwrap_or_default(),
            job: first.map(|r| r.job()).unwrap_or_default(),
            ranks,
            missing: (0..ranks)
                .filter(|k| !reported.iter().any(|r| r.rank == *k))
                .collect(),
            reported,
            cartesian,
            main_loop: main,
            structure,
        }
    }

    /// Reads the records of job `job` (`ranks` ranks) from `dir`, waiting up to `wait` for
    /// those not finished yet (rank 0 at `MPI_Finalize`); a record still unfinished then is
    /// merged as it is. `job: None` takes the job of the first record found (a folder merged
    /// by hand).
    pub fn collect(
        dir: &Path,
        ranks: u64,
        job: Option<&str>,
        wait: Duration,
    ) -> Result<Profile, ProfileError> {
        let deadline = Instant::now() + wait;
        loop {
            let records = read_records(dir, ranks, job)?;
            let all =
                records.len() as u64 == ranks && records.iter().all(|r| r.header.state == FINISHED);
            if all || Instant::now() >= deadline {
                if records.is_empty() {
                    return Err(ProfileError::format(
                        &dir.display().to_string(),
                        "no rank record of this job".into(),
                    ));
                }
                return Ok(Profile::merge(&records, ranks));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Reads a profile file, or merges the rank records of a `.ranks` folder (a job whose
    /// rank 0 did not reach `MPI_Finalize`).
    pub fn read(path: &Path) -> Result<Profile, ProfileError> {
        let shown = path.display().to_string();
        if path.is_dir() {
            let ranks = read_records(path, u64::MAX, None)?
                .iter()
                .map(|r| r.header.ranks)
                .max()
                .unwrap_or(0);
            return Profile::collect(path, ranks, None, Duration::ZERO);
        }
        jitter_trace::sniff::expect_json(
            "",
            path,
            &[jitter_trace::sniff::JsonKind::Profile],
            "an application profile (JITTER_PROFILE)",
        )?;
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError::io(&shown, e))?;
        let p: Profile = serde_json::from_str(&text)
            .map_err(|e| ProfileError::format(&shown, format!("not a profile: {e}")))?;
        if p.format != FORMAT || !(OLDEST..=VERSION).contains(&p.version) {
            return Err(ProfileError::format(
                &shown,
                format!(
                    "format {} version {}, want {FORMAT} {OLDEST} to {VERSION}",
                    p.format, p.version
                ),
            ));
        }
        Ok(p)
    }

    /// Writes the profile as JSON (through `jitter_trace::output`).
    pub fn write(&self, path: &Path) -> Result<(), ProfileError> {
        let shown = path.display().to_string();
        let text = serde_json::to_vec_pretty(self)
            .map_err(|e| ProfileError::format(&shown, e.to_string()))?;
        jitter_trace::output::write_output_bytes(path, &text)?;
        Ok(())
    }
}

/// The records in `dir` of ranks below `ranks` (of job `job`, or of the first record's).
fn read_records(
    dir: &Path,
    ranks: u64,
    job: Option<&str>,
) -> Result<Vec<Box<RankRecord>>, ProfileError> {
    let shown = dir.display().to_string();
    let entries = std::fs::read_dir(dir).map_err(|e| ProfileError::io(&shown, e))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "prof"))
        .collect();
    paths.sort();
    let mut out: Vec<Box<RankRecord>> = Vec::new();
    let mut job = job.map(str::to_string);
    for p in paths {
        let r = RankRecord::read(&p)?;
        let j = r.job();
        if job.get_or_insert_with(|| j.clone()) != &j || r.header.rank >= ranks {
            continue;
        }
        out.push(r);
    }
    out.sort_by_key(|r| r.header.rank);
    out.dedup_by_key(|r| r.header.rank);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Identity;
    use crate::show::render;
    use crate::site::Call;

    fn record(rank: u64, loop_sites: &[(Site, u64)], iterations: u64) -> Box<RankRecord> {
        let its = vec![loop_sites; iterations as usize];
        record_iterations(rank, &its)
    }

    /// A record of a barrier, the iterations given (each its calls with the compute before
    /// each), and a finalize.
    fn record_iterations(rank: u64, its: &[&[(Site, u64)]]) -> Box<RankRecord> {
        let id = Identity {
            rank,
            ranks: 3,
            khz: 1_000_000, // 1 tick = 1 ns
            job: "j".into(),
            host: "h".into(),
            program: "./solver".into(),
        };
        let mut r = RankRecord::new_in_memory(&id, 0);
        let mut t = 0;
        let mut call = |r: &mut RankRecord, s: &Site, gap: u64| {
            t += gap;
            r.record(s, t, t + 10);
            t += 10;
        };
        call(&mut r, &Site::of(Call::Barrier), 5_000);
        for it in its {
            for (s, gap) in it.iter() {
                call(&mut r, s, *gap);
            }
        }
        call(&mut r, &Site::of(Call::Finalize), 7_000);
        r.finish();
        r
    }

    #[test]
    fn ranks_with_one_loop_merge_their_slots_and_a_rank_with_another_is_left_out() {
        let a = Site {
            bytes: 8,
            comm_size: 3,
            ..Site::of(Call::Allreduce)
        };
        let halo = |peer| Site {
            bytes: 1024,
            comm_size: 3,
            peer,
            root: -peer,
            ..Site::of(Call::Sendrecv)
        };
        let solver = [(halo(1), 1_000), (halo(-1), 100), (a, 2_000), (a, 300)];
        let other = [(halo(1), 1_000), (a, 2_000)];
        let records = vec![record(0, &solver, 40), record(2, &other, 40)];
        let p = Profile::merge(&records, 3);
        let l = p.main_loop.as_ref().unwrap();
        assert_eq!((l.iterations, l.ranks.clone()), (40, vec![0]));
        assert_eq!(p.missing, vec![1]);
        assert!(p.reported[0].in_main_loop && !p.reported[1].in_main_loop);
        assert_eq!(p.reported[1].loop_period, Some(2));
        let means: Vec<f64> = l.slots.iter().map(|s| s.compute.mean_ns).collect();
        // Per position, every iteration: the first one's compute after the barrier too.
        assert_eq!(means, vec![1_000.0, 100.0, 2_000.0, 300.0]);
        assert_eq!(l.slots[0].compute.count, 40);
        assert_eq!(l.slots[3].compute.count, 40);
        assert!(l.slots.iter().all(|s| !s.shared));
        assert_eq!(l.slots[2].site, a);
        // Compute in the loop over all compute (barrier's 5 µs and finalize's 7 µs outside).
        let inside = 40.0 * (1_000.0 + 100.0 + 2_000.0 + 300.0);
        let want = inside / (inside + 5_000.0 + 7_000.0);
        assert!((l.compute_share - want).abs() < 1e-9, "{}", l.compute_share);
        // The loop's time: from the barrier's end (5 µs + 10 ns in the call) over 40 iterations
        // of 3.4 µs of compute and 4 calls of 10 ns; the barrier before it, finalize after.
        let t = p.reported[0].timing.unwrap();
        assert_eq!(
            (t.loop_start_ns, t.loop_end_ns),
            (Some(5_010), Some(5_010 + 40 * 3_440))
        );
        assert_eq!((t.iterations, t.barriers_before), (40, Some(1)));
        assert_eq!(t.last_barrier_exit_ns, Some(5_010));
        let st = p.structure.as_ref().unwrap();
        assert_eq!(
            (st.setup_calls, st.output_calls, st.variants.len()),
            (1, 1, 1)
        );
        assert_eq!(
            (st.setup_ns, st.loop_ns, st.output_ns),
            (5_010, 40 * 3_440, 7_010)
        );
        // A file round trip keeps everything.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("app.json");
        p.write(&f).unwrap();
        assert_eq!(Profile::read(&f).unwrap(), p);
    }

    #[test]
    fn a_version_2_profile_reads_and_a_newer_one_is_refused() {
        let wait = |call| Site {
            requests: 2,
            ..Site::of(call)
        };
        let body = [(wait(Call::Waitsome), 1_000), (wait(Call::Testall), 500)];
        let p = Profile::merge(&[record(0, &body, 40)], 3);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("app.json");
        p.write(&f).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(text.contains("\"waitsome\"") && text.contains("\"testall\""));
        assert_eq!(Profile::read(&f).unwrap(), p);
        let with_version = |v: u32| {
            let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
            j["version"] = v.into();
            std::fs::write(&f, j.to_string()).unwrap();
            Profile::read(&f)
        };
        assert_eq!(with_version(2).unwrap().main_loop, p.main_loop);
        let newer = with_version(VERSION + 1).unwrap_err().to_string();
        assert!(newer.contains("want jitterbench-profile 2 to 4"), "{newer}");
    }

    #[test]
    fn one_step_at_two_slots_is_told_apart_by_its_position() {
        let (a, b, c) = (
            Site::of(Call::Barrier),
            Site::of(Call::Wait),
            Site::of(Call::Bcast),
        );
        let body = [(a, 100), (b, 10), (a, 300), (b, 30), (c, 1)];
        // 100 iterations: the loop holds most of the compute (10 would leave it to the set-up's
        // 5 µs and finalize's 7 µs, and the recorded sequence would be the loop).
        let l = Profile::merge(&[record(0, &body, 100)], 1)
            .main_loop
            .unwrap();
        let shared: Vec<bool> = l.slots.iter().map(|s| s.shared).collect();
        // Steps: c→a, a→b, b→a, a→b, b→c: a→b at slots 1 and 3, each with its own compute.
        assert_eq!(shared, vec![false; 5]);
        assert_eq!(l.slots[1].compute.mean_ns, 10.0);
        assert_eq!(l.slots[3].compute.mean_ns, 30.0);
        assert_eq!(l.slots[2].compute.mean_ns, 300.0);
    }

    /// A pattern repeated in a corner of the run (five broadcasts of 10 ns between 5 µs of
    /// set-up and 7 µs before MPI_Finalize) is no main loop: the loop is the recorded sequence,
    /// every call with its own compute, one iteration from MPI_Init to MPI_Finalize.
    #[test]
    fn without_a_loop_holding_most_of_the_compute_the_recorded_sequence_is_replayed() {
        let b = Site {
            comm_size: 2,
            bytes: 4,
            root: 0,
            ..Site::of(Call::Bcast)
        };
        let p = Profile::merge(&[record(0, &[(b, 10)], 5)], 1);
        let st = p.structure.as_ref().unwrap();
        assert!(st.recorded, "{st:?}");
        let l = p.main_loop.as_ref().unwrap();
        let calls: Vec<Call> = l.slots.iter().map(|s| s.site.call).collect();
        let mut want = vec![Call::Barrier];
        want.extend([Call::Bcast; 5]);
        want.push(Call::Finalize);
        assert_eq!((calls, l.iterations), (want, 1));
        let means: Vec<f64> = l.slots.iter().map(|s| s.compute.mean_ns).collect();
        assert_eq!(means, vec![5_000.0, 10.0, 10.0, 10.0, 10.0, 10.0, 7_000.0]);
        let t = p.reported[0].timing.unwrap();
        // 5 µs, 5 broadcasts of 10 ns after 10 ns each, 7 µs, 7 calls of 10 ns (the test's
        // record gives its finalize 10 ns too).
        assert_eq!((t.loop_start_ns, t.loop_end_ns), (Some(0), Some(12_120)));
        assert!(p.reported[0].in_main_loop);
        assert!(render(&p, "x").contains("no main loop: no repeating sequence"));
    }

    /// A time step (a halo and an allreduce) with a longer step at irregular iterations (32
    /// all-to-alls between them, 10 µs of compute before each, as an SCF step whose
    /// diagonalisation sweeps vary): the longer step is a kind of its own, kept with its calls
    /// and compute, and the iterations' order says where it comes.
    #[test]
    fn a_longer_step_at_irregular_iterations_is_a_kind_replayed_in_its_place() {
        let long_at = [3, 7, 12, 18, 19, 25, 33];
        let halo = Site {
            bytes: 1024,
            comm_size: 2,
            peer: 1,
            root: -1,
            ..Site::of(Call::Sendrecv)
        };
        let a = Site {
            bytes: 8,
            comm_size: 2,
            ..Site::of(Call::Allreduce)
        };
        let fft = Site {
            bytes: 4096,
            comm_size: 2,
            ..Site::of(Call::Alltoall)
        };
        let body = [(halo, 1_000), (a, 2_000)];
        let mut long = vec![(halo, 1_000)];
        long.extend([(fft, 10_000); 32]);
        long.push((a, 2_000));
        let its: Vec<&[(Site, u64)]> = (0..40)
            .map(|i| {
                if long_at.contains(&i) {
                    &long[..]
                } else {
                    &body[..]
                }
            })
            .collect();
        let p = Profile::merge(&[record_iterations(0, &its)], 2);
        let l = p.main_loop.as_ref().unwrap();
        assert_eq!(l.slots.len(), 2);
        assert_eq!(l.kinds.len(), 1, "{:?}", p.structure);
        let k = &l.kinds[0];
        assert_eq!((k.slots.len(), k.iterations), (34, 7));
        assert_eq!(k.slots[1].site, fft);
        assert_eq!(k.slots[1].compute.mean_ns, 10_000.0);
        assert_eq!(k.slots[33].site, a);
        let order = l.kinds_in_order().unwrap();
        let want: Vec<u32> = (0..40).map(|i| u32::from(long_at.contains(&i))).collect();
        assert_eq!(order, want);
        // Per iteration: 3 µs, and 323 µs in the long ones.
        let loop_ns = 33.0 * 3_000.0 + 7.0 * 323_000.0;
        assert!((l.mean_compute_ns() - loop_ns / 40.0).abs() < 1e-6);
        let st = p.structure.as_ref().unwrap();
        let total = loop_ns + 5_000.0 + 7_000.0;
        assert!(st.kinds_replayed);
        assert!((st.body_compute_share - 33.0 * 3_000.0 / total).abs() < 1e-9);
        assert!((st.replayed_compute_share - loop_ns / total).abs() < 1e-9);
        assert_eq!(st.kinds_left_out, 0);
        let shown = render(&p, "x");
        assert!(
            shown.contains("replays each iteration as its kind (2 of 2 kinds)"),
            "{shown}"
        );
        assert!(shown.contains(
            "left out of the replay: 1 calls of set-up, 1 calls after the loop (0.5 % of"
        ));
        // The file keeps the kinds; without them (an older file) every iteration is the body.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("app.json");
        p.write(&f).unwrap();
        assert_eq!(Profile::read(&f).unwrap(), p);
        let mut j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let m = j["main_loop"].as_object_mut().unwrap();
        m.remove("kinds");
        m.remove("order");
        j["version"] = 3.into();
        std::fs::write(&f, j.to_string()).unwrap();
        let old = Profile::read(&f).unwrap().main_loop.unwrap();
        assert!(old.kinds.is_empty() && old.kinds_in_order().is_none());
        assert_eq!(old.mean_compute_ns(), 3_000.0);
    }
}
