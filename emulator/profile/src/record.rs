//! One rank's raw record: a fixed-layout struct ([`RankRecord`]) that the recording rank maps
//! from its own file (`MAP_SHARED`), so that every call it records is in the page cache at once
//! and nothing recorded is lost when the rank dies (a crash, a kill, `MPI_Abort`): only a crash
//! of the machine loses it. [`Recorder::record`] is the hot path: plain stores into the mapping,
//! no allocation, no lock, no system call (the file's blocks are reserved before it is mapped,
//! so no store can meet a full disk, and populated when it is mapped).
//!
//! What it keeps: every call site ([`Site`], up to [`SITES`]), every step (a pair of
//! consecutive sites, up to [`STEPS`]) with the distribution of the compute interval before
//! it (counter ticks, `histogram`) and the time spent in its call, and the last [`SEQUENCE`]
//! sites in order with the counter at each call's start and end (from which `sequence` finds the
//! main loop, and `profile` its compute per position and the time its iterations took); and how
//! long `MPI_Init` took, the MPI library's part and the preload library's part apart. The compute interval of a call
//! is the time from the end of the previous MPI call (or of `MPI_Init`) to its start. Keying
//! the intervals by step rather than by site tells apart two identical calls at two places of
//! one iteration (the two allreduces of a solver), which have different predecessors.
//!
//! The file is read back on a machine of the same architecture (native byte order); its header
//! says its magic, version and size, checked by [`RankRecord::read`].

use std::path::Path;

use crate::error::ProfileError;
use crate::histogram::{bucket, BUCKETS};
use crate::site::{Call, Site};

/// `JBPROF01`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"JBPROF01");
/// Layout version: 3 records the calls `Call` 16–26 (same layout); a version-2 record is a
/// version-3 record without them and reads as one.
pub const VERSION: u64 = 3;
/// The oldest version read.
const OLDEST: u64 = 2;
/// Call sites a rank can tell apart; later new sites count in `site_overflow`.
pub(crate) const SITES: usize = 1024;
const SITE_INDEX: usize = 2 * SITES;
/// Steps (pairs of consecutive sites) a rank can tell apart; later ones count in
/// `step_overflow`.
pub(crate) const STEPS: usize = 256;
const STEP_INDEX: usize = 2 * STEPS;
/// The last calls kept in order (for the main loop).
pub(crate) const SEQUENCE: usize = 1 << 16;
/// No site: before the first call, or a site beyond [`SITES`].
pub(crate) const NO_SITE: u16 = u16::MAX;
/// The recording rank's state: still recording (or died), and finished at `MPI_Finalize`.
pub(crate) const RECORDING: u64 = 1;
/// See [`RECORDING`].
pub const FINISHED: u64 = 2;
const NAME: usize = 64;

/// The header of a rank record.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u64,
    /// `size_of::<RankRecord>()`.
    pub size_bytes: u64,
    /// [`RECORDING`] or [`FINISHED`].
    pub state: u64,
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: u64,
    /// Ranks of the job.
    pub ranks: u64,
    /// Counter frequency, kHz (ticks to ns).
    pub khz: u64,
    /// Calls recorded.
    pub calls: u64,
    /// Σ compute intervals, ticks.
    pub compute_ticks: u64,
    /// Σ time in the calls, ticks.
    pub call_ticks: u64,
    /// Counter at the end of the last call (or of `MPI_Init`).
    pub last_exit: u64,
    /// Site of the last call ([`NO_SITE`] before the first).
    pub prev_site: u64,
    /// Sites in use.
    pub sites_used: u64,
    /// Steps in use.
    pub steps_used: u64,
    /// Calls at a site beyond [`SITES`].
    pub site_overflow: u64,
    /// Calls at a step beyond [`STEPS`].
    pub step_overflow: u64,
    /// Dimensions of the Cartesian topology the program made (0: none).
    pub cart_ndims: u64,
    /// Its dimensions (the first `cart_ndims`).
    pub cart_dims: [i32; 8],
    /// Its periodicity (non-zero: periodic).
    pub cart_periods: [i32; 8],
    /// The launcher's job id (NUL-padded).
    pub job: [u8; NAME],
    /// Host name (NUL-padded).
    pub host: [u8; NAME],
    /// The program (`argv[0]`, NUL-padded).
    pub program: [u8; 2 * NAME],
    /// Counter when the `MPI_Init` wrapper began (0: not told).
    pub init_enter: u64,
    /// Counter when `PMPI_Init` began.
    pub pmpi_init_enter: u64,
    /// Counter when `PMPI_Init` returned.
    pub pmpi_init_exit: u64,
    /// Counter when the `MPI_Init` wrapper returned (the replay, if any, started just before).
    pub init_exit: u64,
}

/// One site in the record.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct SiteSlot {
    call: u32,
    comm_size: u32,
    bytes: u64,
    peer: i32,
    root: i32,
    requests: u32,
    used: u32,
    /// Calls at this site.
    pub count: u64,
}

/// One step: the calls at `site` that followed a call at `prev`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct StepSlot {
    /// The previous call's site ([`NO_SITE`]: the first call).
    pub prev: u16,
    /// This call's site.
    pub site: u16,
    used: u32,
    /// Calls.
    pub count: u64,
    /// Σ compute intervals before them, ticks.
    pub compute_ticks: u64,
    /// Σ time in them, ticks.
    pub call_ticks: u64,
    /// Compute intervals per bucket (`histogram::bucket` of ticks), saturating.
    pub buckets: [u32; BUCKETS],
}

/// A rank's whole record (all integers, no padding: any bytes are a value of it).
#[repr(C)]
#[derive(Debug)]
pub struct RankRecord {
    /// The header.
    pub header: Header,
    sites: [SiteSlot; SITES],
    site_index: [u16; SITE_INDEX],
    steps: [StepSlot; STEPS],
    step_index: [u16; STEP_INDEX],
    sequence: [u16; SEQUENCE],
    enters: [u64; SEQUENCE],
    exits: [u64; SEQUENCE],
}

const _: () = assert!(std::mem::size_of::<Header>() % 8 == 0);
const _: () = assert!(std::mem::size_of::<SiteSlot>() == 40);
const _: () = assert!(std::mem::size_of::<StepSlot>() == 32 + 4 * BUCKETS);
const _: () = assert!(
    std::mem::size_of::<RankRecord>()
        == std::mem::size_of::<Header>()
            + 40 * SITES
            + 2 * SITE_INDEX
            + (32 + 4 * BUCKETS) * STEPS
            + 2 * STEP_INDEX
            + 2 * SEQUENCE
            + 16 * SEQUENCE
);

fn hash(words: &[u64]) -> u64 {
    words.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &w| {
        (h ^ w).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn copy_name(dst: &mut [u8], src: &str) {
    let n = src.len().min(dst.len() - 1);
    dst[..n].copy_from_slice(&src.as_bytes()[..n]);
}

fn name_of(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

impl SiteSlot {
    fn site(&self) -> Option<Site> {
        Some(Site {
            call: Call::from_number(self.call)?,
            comm_size: self.comm_size,
            bytes: self.bytes,
            peer: self.peer,
            root: self.root,
            requests: self.requests,
        })
    }
    fn holds(&self, s: &Site) -> bool {
        self.call == s.call as u32
            && self.comm_size == s.comm_size
            && self.bytes == s.bytes
            && self.peer == s.peer
            && self.root == s.root
            && self.requests == s.requests
    }
}

/// Who is recording: written into the header when the record is created.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: u64,
    /// Ranks of the job.
    pub ranks: u64,
    /// Counter frequency, kHz.
    pub khz: u64,
    /// The launcher's job id.
    pub job: String,
    /// Host name.
    pub host: String,
    /// The program.
    pub program: String,
}

impl RankRecord {
    fn init(&mut self, id: &Identity, now: u64) {
        let h = &mut self.header;
        h.magic = MAGIC;
        h.version = VERSION;
        h.size_bytes = std::mem::size_of::<RankRecord>() as u64;
        h.state = RECORDING;
        h.rank = id.rank;
        h.ranks = id.ranks;
        h.khz = id.khz;
        h.last_exit = now;
        h.prev_site = u64::from(NO_SITE);
        copy_name(&mut h.job, &id.job);
        copy_name(&mut h.host, &id.host);
        copy_name(&mut h.program, &id.program);
    }

    /// The site's number, added if new ([`NO_SITE`] when the table is full).
    #[inline]
    fn site_id(&mut self, s: &Site) -> u16 {
        let h = hash(&[
            u64::from(s.call as u32),
            u64::from(s.comm_size),
            s.bytes,
            s.peer as u64,
            s.root as u64,
            u64::from(s.requests),
        ]);
        let mut i = (h as usize) % SITE_INDEX;
        loop {
            match self.site_index[i] {
                0 => break,
                n => {
                    let id = usize::from(n - 1);
                    if id < SITES && self.sites[id].holds(s) {
                        return id as u16;
                    }
                }
            }
            i = (i + 1) % SITE_INDEX;
        }
        let id = self.header.sites_used as usize;
        if id >= SITES {
            self.header.site_overflow += 1;
            return NO_SITE;
        }
        self.header.sites_used += 1;
        self.site_index[i] = id as u16 + 1;
        self.sites[id] = SiteSlot {
            call: s.call as u32,
            comm_size: s.comm_size,
            bytes: s.bytes,
            peer: s.peer,
            root: s.root,
            requests: s.requests,
            used: 1,
            count: 0,
        };
        id as u16
    }

    /// The step's number, added if new (`None` when the table is full).
    #[inline]
    fn step_id(&mut self, prev: u16, site: u16) -> Option<usize> {
        let mut i = (hash(&[u64::from(prev), u64::from(site)]) as usize) % STEP_INDEX;
        loop {
            match self.step_index[i] {
                0 => break,
                n => {
                    let id = usize::from(n - 1);
                    if id < STEPS && self.steps[id].prev == prev && self.steps[id].site == site {
                        return Some(id);
                    }
                }
            }
            i = (i + 1) % STEP_INDEX;
        }
        let id = self.header.steps_used as usize;
        if id >= STEPS {
            self.header.step_overflow += 1;
            return None;
        }
        self.header.steps_used += 1;
        self.step_index[i] = id as u16 + 1;
        let step = &mut self.steps[id];
        (step.prev, step.site, step.used) = (prev, site, 1);
        Some(id)
    }

    /// Records one call at `site` that began at counter `enter` and ended at `exit`.
    #[inline]
    pub fn record(&mut self, site: &Site, enter: u64, exit: u64) {
        let compute = enter.saturating_sub(self.header.last_exit);
        let in_call = exit.saturating_sub(enter);
        let id = self.site_id(site);
        if id != NO_SITE {
            self.sites[usize::from(id)].count += 1;
        }
        let prev = self.header.prev_site as u16;
        if let Some(s) = self.step_id(prev, id) {
            let step = &mut self.steps[s];
            step.count += 1;
            step.compute_ticks += compute;
            step.call_ticks += in_call;
            let b = &mut step.buckets[bucket(compute)];
            *b = b.saturating_add(1);
        }
        let h = &mut self.header;
        let at = (h.calls as usize) % SEQUENCE;
        self.sequence[at] = id;
        self.enters[at] = enter;
        self.exits[at] = exit;
        h.calls += 1;
        h.compute_ticks += compute;
        h.call_ticks += in_call;
        h.last_exit = exit;
        h.prev_site = u64::from(id);
    }

    /// Records the Cartesian topology the program made (the first one kept).
    pub fn set_cartesian(&mut self, dims: &[i32], periods: &[i32]) {
        let h = &mut self.header;
        if h.cart_ndims != 0 || dims.is_empty() || dims.len() > 8 || periods.len() != dims.len() {
            return;
        }
        h.cart_ndims = dims.len() as u64;
        h.cart_dims[..dims.len()].copy_from_slice(dims);
        h.cart_periods[..dims.len()].copy_from_slice(periods);
    }

    /// Marks the record finished (at `MPI_Finalize`).
    pub fn finish(&mut self) {
        self.header.state = FINISHED;
    }

    /// The recorded sites, by number.
    pub fn sites(&self) -> Vec<Option<Site>> {
        let n = (self.header.sites_used as usize).min(SITES);
        self.sites[..n].iter().map(SiteSlot::site).collect()
    }

    /// The site numbered `id`, with its count.
    pub fn site(&self, id: u16) -> Option<(Site, u64)> {
        let slot = self
            .sites
            .get(usize::from(id))
            .filter(|_| u64::from(id) < self.header.sites_used)?;
        Some((slot.site()?, slot.count))
    }

    /// The step from `prev` to `site`, if recorded.
    pub fn step(&self, prev: u16, site: u16) -> Option<&StepSlot> {
        let n = (self.header.steps_used as usize).min(STEPS);
        self.steps[..n]
            .iter()
            .find(|s| s.prev == prev && s.site == site)
    }

    /// The kept sequence of site numbers, oldest first (the last [`SEQUENCE`] calls).
    pub fn sequence(&self) -> Vec<u16> {
        let calls = self.header.calls as usize;
        if calls <= SEQUENCE {
            return self.sequence[..calls].to_vec();
        }
        let at = calls % SEQUENCE;
        let mut v = self.sequence[at..].to_vec();
        v.extend_from_slice(&self.sequence[..at]);
        v
    }

    /// Calls kept in order: the last [`SEQUENCE`] of them.
    pub(crate) fn sequence_len(&self) -> usize {
        (self.header.calls as usize).min(SEQUENCE)
    }

    /// The counters at the start and end of each kept call, in the order of [`Self::sequence`].
    pub fn times(&self) -> Vec<(u64, u64)> {
        let calls = self.header.calls as usize;
        let pair = |i: usize| (self.enters[i], self.exits[i]);
        if calls <= SEQUENCE {
            return (0..calls).map(pair).collect();
        }
        let at = calls % SEQUENCE;
        (at..SEQUENCE).chain(0..at).map(pair).collect()
    }

    /// Records how `MPI_Init` went: the counters at the wrapper's start, around `PMPI_Init`, and
    /// at the wrapper's end.
    pub fn set_init(&mut self, init_enter: u64, pmpi: (u64, u64), init_exit: u64) {
        let h = &mut self.header;
        (h.init_enter, h.pmpi_init_enter) = (init_enter, pmpi.0);
        (h.pmpi_init_exit, h.init_exit) = (pmpi.1, init_exit);
    }

    /// The launcher's job id.
    pub fn job(&self) -> String {
        name_of(&self.header.job)
    }
    /// Host name.
    pub fn host(&self) -> String {
        name_of(&self.header.host)
    }
    /// The program.
    pub fn program(&self) -> String {
        name_of(&self.header.program)
    }

    /// Ticks to ns with the record's counter frequency.
    pub fn ns(&self, ticks: u64) -> u64 {
        (u128::from(ticks) * 1_000_000 / u128::from(self.header.khz.max(1))) as u64
    }

    /// A zeroed record on the heap.
    fn zeroed() -> Box<RankRecord> {
        let layout = std::alloc::Layout::new::<RankRecord>();
        // SAFETY: the layout is RankRecord's, of non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<RankRecord>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `p` was allocated by the global allocator with RankRecord's layout and
        // zero-filled; RankRecord is `repr(C)` of integers and integer arrays only, so all-zero
        // bytes are a valid value of it; the Box takes sole ownership.
        unsafe { Box::from_raw(p) }
    }

    /// A record built in memory (tests, and the reader).
    #[cfg(test)]
    pub(crate) fn new_in_memory(id: &Identity, now: u64) -> Box<RankRecord> {
        let mut r = RankRecord::zeroed();
        r.init(id, now);
        r
    }

    /// Reads a rank file back, checking its magic, version, size and tables.
    pub fn read(path: &Path) -> Result<Box<RankRecord>, ProfileError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ProfileError::io(&shown, e))?;
        let size = std::mem::size_of::<RankRecord>();
        if bytes.len() != size {
            return Err(ProfileError::format(
                &shown,
                format!("{} bytes, a rank record has {size}", bytes.len()),
            ));
        }
        let mut r = RankRecord::zeroed();
        // SAFETY: `r` is a live, exclusively owned RankRecord of `size` bytes; any bytes are a
        // valid value of it (integers only, no padding: the size assertions above).
        let dst = unsafe {
            std::slice::from_raw_parts_mut((&mut *r as *mut RankRecord).cast::<u8>(), size)
        };
        dst.copy_from_slice(&bytes);
        let h = &r.header;
        if h.magic != MAGIC
            || !(OLDEST..=VERSION).contains(&h.version)
            || h.size_bytes != size as u64
        {
            return Err(ProfileError::format(
                &shown,
                "not a rank record of this version (magic, version or size differ)".into(),
            ));
        }
        if h.sites_used > SITES as u64 || h.steps_used > STEPS as u64 || h.khz == 0 {
            return Err(ProfileError::format(
                &shown,
                "damaged: its tables say more entries than they hold".into(),
            ));
        }
        Ok(r)
    }
}

/// A record mapped from its file, written in place by the recording rank.
#[derive(Debug)]
pub struct Recorder {
    record: &'static mut RankRecord,
}

impl Recorder {
    /// Creates (or truncates) `path`, reserves its blocks (`jitter_trace::output::reserve`:
    /// refused on a full file system or above the file size limit), maps it and starts the
    /// record at counter `now`.
    pub fn create(path: &Path, id: &Identity, now: u64) -> Result<Recorder, ProfileError> {
        use std::os::fd::AsRawFd;
        let shown = path.display().to_string();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| ProfileError::io(&shown, e))?;
        let size = std::mem::size_of::<RankRecord>();
        // Every block of the mapping is allocated now: a store into a page the file system
        // could not back would raise SIGBUS in the middle of the program's MPI call.
        if let Err(e) = jitter_trace::output::reserve(&file, path, size as u64) {
            // A record that could not be reserved is no record: nothing is left to merge.
            let _ = std::fs::remove_file(path);
            return Err(e.into());
        }
        // SAFETY: a new shared mapping of a file of `size` bytes, opened read-write; the
        // result is checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ProfileError::io(&shown, std::io::Error::last_os_error()));
        }
        // SAFETY: the mapping is page-aligned (≥ RankRecord's alignment of 8), `size` bytes
        // long, zero-filled by `reserve` (a valid RankRecord: integers only), never unmapped
        // (it lives to the end of the process, which is what keeps it after a crash) and
        // reachable only through this Recorder.
        let record = unsafe { &mut *p.cast::<RankRecord>() };
        record.init(id, now);
        Ok(Recorder { record })
    }

    /// The record.
    pub fn record(&mut self) -> &mut RankRecord {
        self.record
    }

    /// Marks the record finished and asks the kernel to write it out.
    pub fn finish(&mut self) {
        self.record.finish();
        let size = std::mem::size_of::<RankRecord>();
        // SAFETY: the mapping made in `create`, of `size` bytes, still mapped.
        unsafe {
            libc::msync(
                (self.record as *mut RankRecord).cast::<libc::c_void>(),
                size,
                libc::MS_ASYNC,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::Call;

    fn id() -> Identity {
        Identity {
            rank: 1,
            ranks: 2,
            khz: 2_000_000,
            job: "job-7".into(),
            host: "h".into(),
            program: "./app".into(),
        }
    }

    #[test]
    fn steps_tell_apart_two_identical_calls_with_different_predecessors() {
        let mut r = RankRecord::new_in_memory(&id(), 0);
        let a = Site {
            bytes: 8,
            comm_size: 2,
            ..Site::of(Call::Allreduce)
        };
        let s = Site {
            peer: 1,
            bytes: 800,
            comm_size: 2,
            ..Site::of(Call::Sendrecv)
        };
        let mut t = 0;
        for _ in 0..10 {
            // allreduce after 100 ticks, sendrecv after 50, allreduce after 300
            for (site, gap) in [(a, 100), (s, 50), (a, 300)] {
                t += gap;
                r.record(&site, t, t + 10);
                t += 10;
            }
        }
        assert_eq!(r.header.calls, 30);
        assert_eq!(r.sites().len(), 2);
        let (ia, is) = (0u16, 1u16);
        let after_s = r.step(is, ia).unwrap();
        assert_eq!((after_s.count, after_s.compute_ticks), (10, 3000));
        let after_a = r.step(ia, ia).unwrap();
        assert_eq!((after_a.count, after_a.compute_ticks), (9, 900));
        assert_eq!(r.step(NO_SITE, ia).unwrap().count, 1);
        assert_eq!(r.sequence().len(), 30);
        assert_eq!(r.ns(2_000_000), 1_000_000);
    }

    #[test]
    fn a_mapped_record_is_in_its_file_before_it_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rank-0.prof");
        let mut rec = Recorder::create(&path, &id(), 5).unwrap();
        rec.record().record(&Site::of(Call::Barrier), 105, 110);
        // Read back while still "recording" (as after a rank died): the call is there.
        let back = RankRecord::read(&path).unwrap();
        assert_eq!((back.header.calls, back.header.state), (1, RECORDING));
        assert_eq!(back.job(), "job-7");
        assert_eq!(back.step(NO_SITE, 0).unwrap().compute_ticks, 100);
        rec.finish();
        assert_eq!(RankRecord::read(&path).unwrap().header.state, FINISHED);
        std::fs::write(&path, b"short").unwrap();
        assert!(RankRecord::read(&path).is_err());
    }

    #[test]
    fn sites_beyond_the_table_are_counted_not_lost_silently() {
        let mut r = RankRecord::new_in_memory(&id(), 0);
        for b in 0..(SITES as u64 + 5) {
            let s = Site {
                bytes: b,
                ..Site::of(Call::Bcast)
            };
            r.record(&s, 1, 2);
        }
        assert_eq!(r.header.sites_used, SITES as u64);
        assert_eq!(r.header.site_overflow, 5);
        assert_eq!(r.header.calls, SITES as u64 + 5);
    }

    #[test]
    fn a_version_2_record_reads_and_a_newer_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rank-0.prof");
        let mut rec = Recorder::create(&path, &id(), 5).unwrap();
        let waitany = Site {
            requests: 1,
            ..Site::of(Call::Waitany)
        };
        rec.record().record(&Site::of(Call::Wait), 10, 20);
        rec.record().record(&waitany, 30, 40);
        rec.finish();
        assert_eq!(RankRecord::read(&path).unwrap().sites()[1], Some(waitany));
        let with_version = |v: u64| {
            let mut bytes = std::fs::read(&path).unwrap();
            // The header's second word.
            bytes[8..16].copy_from_slice(&v.to_ne_bytes());
            std::fs::write(&path, bytes).unwrap();
            RankRecord::read(&path)
        };
        let old = with_version(2).expect("a version-2 record reads");
        assert_eq!(old.header.calls, 2);
        assert!(with_version(VERSION + 1).is_err());
        assert!(with_version(1).is_err());
    }
}
