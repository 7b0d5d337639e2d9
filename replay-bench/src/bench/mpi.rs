//! The benchmark's collectives under MPI: `MPI_COMM_WORLD` (or any communicator) as a
//! [`Collective`]. Only portable MPI-1/MPI-3 calls are used (barrier, bcast, reduce, allreduce,
//! gather, alltoallv, split by shared memory), so OpenMPI and MPICH both work.

use jitter_predict::comm::{trim, Collective, Parts, RECORD_BYTES};
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// MPI_COMM_WORLD (or any communicator) as a [`Collective`].
pub(crate) struct Mpi {
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
    pub(crate) fn ranks_on_this_host(&self) -> usize {
        self.host.size() as usize
    }

    /// The lowest rank of each host runs `f`; its bytes reach every rank of that host
    /// (collective over all ranks). Used for per-host work such as the emulator calibration.
    pub(crate) fn shared_from_host_root(&self, f: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
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
