//! The few collectives the benchmark needs, behind a trait so the phase loop runs under MPI and,
//! in unit tests, as a single process. Only portable MPI-1/MPI-3 calls are used (barrier, bcast,
//! reduce, allreduce, gather, alltoallv, split by shared memory), so OpenMPI and MPICH both work.

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// Bytes of one gathered record (a serialised [`crate::report::RankCost`] or an error line).
pub const RECORD_BYTES: usize = 1024;

/// Collectives over all ranks of the benchmark.
pub trait Collective {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Waits for every rank.
    fn barrier(&self);
    /// Element-wise maximum over ranks, result on every rank.
    fn all_max(&self, values: &mut [f64]);
    /// Element-wise sum over ranks, result on every rank.
    fn all_sum(&self, values: &mut [f64]);
    /// Element-wise sum over ranks; the result is valid on rank 0 only.
    fn sum_to_root(&self, values: &mut [f64]);
    /// Rank 0's value on every rank.
    fn broadcast_u64(&self, value: &mut u64);
    /// Every rank's fixed-size record, in rank order, on rank 0 (empty elsewhere).
    fn gather_records(&self, record: &[u8; RECORD_BYTES]) -> Vec<Vec<u8>>;
    /// Personalised all-to-all (`MPI_Alltoallv`): rank p's part of `send` (`to`) goes to rank
    /// p, and rank p's values for this rank land in its part of `recv` (`from`).
    fn exchange(&self, send: &[u64], to: &Parts, recv: &mut [u64], from: &Parts);
    /// [`Collective::barrier`] through its nonblocking twin, polled to completion with `poll`
    /// run between two polls (paying at calls: a detour due while the rank waits is paid at its
    /// time, and nothing progresses meanwhile); by default the barrier, then `poll` once.
    fn barrier_polled(&self, poll: &mut dyn FnMut()) {
        self.barrier();
        poll();
    }
    /// [`Collective::all_max`] as [`Collective::barrier_polled`] is the barrier.
    fn all_max_polled(&self, values: &mut [f64], poll: &mut dyn FnMut()) {
        self.all_max(values);
        poll();
    }
    /// [`Collective::sum_to_root`] as [`Collective::barrier_polled`] is the barrier.
    fn sum_to_root_polled(&self, values: &mut [f64], poll: &mut dyn FnMut()) {
        self.sum_to_root(values);
        poll();
    }
    /// [`Collective::exchange`] with `meanwhile` run while the values travel (under MPI
    /// `MPI_Ialltoallv`, `meanwhile`, then the wait); by default, after the exchange.
    fn exchange_during(
        &self,
        send: &[u64],
        to: &Parts,
        recv: &mut [u64],
        from: &Parts,
        meanwhile: &mut dyn FnMut(),
    ) {
        self.exchange(send, to, recv, from);
        meanwhile();
    }
}

/// How the buffer of an all-to-all is split by rank: `counts[p]` values from `displs[p]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parts {
    /// Values for (or from) each rank.
    pub counts: Vec<i32>,
    /// Where each rank's values start.
    pub displs: Vec<i32>,
}

impl Parts {
    /// No values for any of `ranks` ranks.
    pub fn new(ranks: usize) -> Self {
        Parts {
            counts: vec![0; ranks],
            displs: vec![0; ranks],
        }
    }

    /// Lays the parts out one after the other in rank order; returns the total count.
    pub fn lay_out(&mut self) -> usize {
        let mut sum = 0;
        for (d, &c) in self.displs.iter_mut().zip(&self.counts) {
            *d = sum;
            sum += c;
        }
        sum as usize
    }

    /// Rank `p`'s part of `buf`.
    pub fn of<'a>(&self, buf: &'a [u64], p: usize) -> &'a [u64] {
        let at = self.displs[p] as usize;
        &buf[at..at + self.counts[p] as usize]
    }
}

/// A single process: every collective is the identity.
#[derive(Debug, Clone, Copy, Default)]
pub struct Solo;

impl Collective for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn barrier(&self) {}
    fn all_max(&self, _: &mut [f64]) {}
    fn all_sum(&self, _: &mut [f64]) {}
    fn sum_to_root(&self, _: &mut [f64]) {}
    fn broadcast_u64(&self, _: &mut u64) {}
    fn gather_records(&self, record: &[u8; RECORD_BYTES]) -> Vec<Vec<u8>> {
        vec![trim(record)]
    }
    fn exchange(&self, send: &[u64], to: &Parts, recv: &mut [u64], from: &Parts) {
        let mine = to.of(send, 0);
        let at = from.displs[0] as usize;
        recv[at..at + mine.len()].copy_from_slice(mine);
    }
}

/// MPI_COMM_WORLD (or any communicator) as a [`Collective`].
pub struct Mpi {
    comm: SimpleCommunicator,
    host: SimpleCommunicator,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.comm.rank())
            .field("size", &self.comm.size())
            .finish()
    }
}

impl Mpi {
    /// Wraps a communicator.
    /// Wraps a communicator (collective: splits it by shared memory, i.e. by host).
    pub fn new(comm: SimpleCommunicator) -> Self {
        let host = comm.split_shared(comm.rank());
        Mpi { comm, host }
    }

    /// Ranks sharing this rank's memory (its physical node), from `MPI_Comm_split_type`.
    pub fn ranks_on_this_host(&self) -> usize {
        self.host.size() as usize
    }

    /// The lowest rank of each host runs `f`; its bytes reach every rank of that host
    /// (collective over all ranks). Used for per-host work such as the emulator calibration.
    pub fn shared_from_host_root(&self, f: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
        let root = self.host.process_at_rank(0);
        let mut bytes = if self.host.rank() == 0 {
            f()
        } else {
            Vec::new()
        };
        let mut len = bytes.len() as u64;
        root.broadcast_into(&mut len);
        bytes.resize(len as usize, 0);
        root.broadcast_into(&mut bytes[..]);
        bytes
    }
}

impl Collective for Mpi {
    fn rank(&self) -> usize {
        self.comm.rank() as usize
    }
    fn size(&self) -> usize {
        self.comm.size() as usize
    }
    fn barrier(&self) {
        self.comm.barrier();
    }
    fn all_max(&self, values: &mut [f64]) {
        let send = values.to_vec();
        self.comm
            .all_reduce_into(&send[..], values, SystemOperation::max());
    }
    fn all_sum(&self, values: &mut [f64]) {
        let send = values.to_vec();
        self.comm
            .all_reduce_into(&send[..], values, SystemOperation::sum());
    }
    fn sum_to_root(&self, values: &mut [f64]) {
        let root = self.comm.process_at_rank(0);
        let send = values.to_vec();
        if self.comm.rank() == 0 {
            root.reduce_into_root(&send[..], values, SystemOperation::sum());
        } else {
            root.reduce_into(&send[..], SystemOperation::sum());
        }
    }
    fn broadcast_u64(&self, value: &mut u64) {
        self.comm.process_at_rank(0).broadcast_into(value);
    }
    fn gather_records(&self, record: &[u8; RECORD_BYTES]) -> Vec<Vec<u8>> {
        let root = self.comm.process_at_rank(0);
        if self.comm.rank() == 0 {
            let mut all = vec![0u8; RECORD_BYTES * self.size()];
            root.gather_into_root(&record[..], &mut all[..]);
            all.chunks(RECORD_BYTES).map(trim).collect()
        } else {
            root.gather_into(&record[..]);
            Vec::new()
        }
    }
    fn exchange(&self, send: &[u64], to: &Parts, recv: &mut [u64], from: &Parts) {
        let send = Partition::new(send, &to.counts[..], &to.displs[..]);
        let mut recv = PartitionMut::new(recv, &from.counts[..], &from.displs[..]);
        self.comm.all_to_all_varcount_into(&send, &mut recv);
    }
    fn barrier_polled(&self, poll: &mut dyn FnMut()) {
        until_done(self.comm.immediate_barrier(), poll);
    }
    fn all_max_polled(&self, values: &mut [f64], poll: &mut dyn FnMut()) {
        let send = values.to_vec();
        mpi::request::scope(|scope| {
            let op = SystemOperation::max();
            let r = self
                .comm
                .immediate_all_reduce_into(scope, &send[..], values, op);
            until_done(r, poll);
        });
    }
    fn sum_to_root_polled(&self, values: &mut [f64], poll: &mut dyn FnMut()) {
        let root = self.comm.process_at_rank(0);
        let send = values.to_vec();
        let op = SystemOperation::sum();
        mpi::request::scope(|scope| {
            if self.comm.rank() == 0 {
                until_done(
                    root.immediate_reduce_into_root(scope, &send[..], values, op),
                    poll,
                );
            } else {
                until_done(root.immediate_reduce_into(scope, &send[..], op), poll);
            }
        });
    }
    fn exchange_during(
        &self,
        send: &[u64],
        to: &Parts,
        recv: &mut [u64],
        from: &Parts,
        meanwhile: &mut dyn FnMut(),
    ) {
        let send = Partition::new(send, &to.counts[..], &to.displs[..]);
        let mut recv = PartitionMut::new(recv, &from.counts[..], &from.displs[..]);
        mpi::request::scope(|scope| {
            let pending = self
                .comm
                .immediate_all_to_all_varcount_into(scope, &send, &mut recv);
            meanwhile();
            pending.wait();
        });
    }
}

/// Tests `request` until it completes, running `poll` between two tests.
fn until_done<'a, D: ?Sized, S: mpi::request::Scope<'a>>(
    mut request: mpi::request::Request<'a, D, S>,
    poll: &mut dyn FnMut(),
) {
    loop {
        match request.test() {
            Ok(_) => return,
            Err(r) => {
                request = r;
                poll();
            }
        }
    }
}

/// Packs `bytes` (cut at [`RECORD_BYTES`], zero-padded) into a record.
pub fn record(bytes: &[u8]) -> [u8; RECORD_BYTES] {
    let mut r = [0u8; RECORD_BYTES];
    let n = bytes.len().min(RECORD_BYTES);
    r[..n].copy_from_slice(&bytes[..n]);
    r
}

fn trim(record: &[u8]) -> Vec<u8> {
    let end = record.iter().position(|&b| b == 0).unwrap_or(record.len());
    record[..end].to_vec()
}

/// A failure every rank agreed on (see [`agree`]): all ranks hold it at the same point.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Agreed {
    /// On rank 0: the error of the lowest failing rank; elsewhere a placeholder.
    pub message: String,
}

/// Makes every rank agree on the outcome of a step that may fail on some ranks: when any rank
/// failed, every rank gets an [`Agreed`] error, and rank 0's carries the message of the lowest
/// failing rank. Never leaves a rank waiting: all ranks call it at the same point, successful
/// or not.
pub fn agree<T, C: Collective + ?Sized>(comm: &C, outcome: anyhow::Result<T>) -> anyhow::Result<T> {
    let mut failed = [if outcome.is_err() { 1.0 } else { 0.0 }];
    comm.all_max(&mut failed);
    if failed[0] == 0.0 {
        return outcome;
    }
    let msg = match &outcome {
        Err(e) => crate::error_line(e),
        Ok(_) => String::new(),
    };
    let all = comm.gather_records(&record(msg.as_bytes()));
    let first = all
        .iter()
        .enumerate()
        .find(|(_, m)| !m.is_empty())
        .map(|(r, m)| (r, String::from_utf8_lossy(m).into_owned()));
    let message = match first {
        Some((0, m)) => m,
        Some((r, m)) => format!("rank {r}: {m}"),
        None => "another rank failed".into(),
    };
    Err(Agreed { message }.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_lie_one_after_the_other_in_rank_order() {
        let mut p = Parts::new(3);
        p.counts = vec![2, 0, 4];
        assert_eq!(p.lay_out(), 6);
        assert_eq!(p.displs, vec![0, 2, 2]);
        let buf = [10, 11, 20, 21, 22, 23];
        assert_eq!(p.of(&buf, 0), &[10, 11]);
        assert!(p.of(&buf, 1).is_empty());
        assert_eq!(p.of(&buf, 2), &[20, 21, 22, 23]);
        let mut got = [0u64; 6];
        Solo.exchange(
            &buf,
            &Parts {
                counts: vec![6],
                displs: vec![0],
            },
            &mut got,
            &Parts {
                counts: vec![6],
                displs: vec![0],
            },
        );
        assert_eq!(got, buf);
    }

    #[test]
    fn records_pad_and_trim() {
        let r = record(b"hello");
        assert_eq!(Solo.gather_records(&r), vec![b"hello".to_vec()]);
        let long = vec![b'x'; 5000];
        assert_eq!(trim(&record(&long)).len(), RECORD_BYTES);
    }

    #[test]
    fn agree_passes_success_and_failure_through_on_one_rank() {
        assert_eq!(agree(&Solo, Ok(3)).unwrap(), 3);
        let e = agree::<(), _>(&Solo, Err(anyhow::anyhow!("bad trace"))).unwrap_err();
        assert_eq!(e.to_string(), "bad trace");
        assert!(e.downcast_ref::<Agreed>().is_some());
    }
}
