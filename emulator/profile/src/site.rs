//! A call site: what one MPI call does, as the profile tells call sites apart — the call, its
//! bytes, its communicator's size, the peer relative to the rank (point-to-point) and the root
//! (rooted collectives). Two calls with the same [`Site`] are the same site, whatever code made
//! them (no return addresses: they differ between ranks' binaries and say nothing to a model).

use serde::{Deserialize, Serialize};

/// The peer of a call that has none, or that the program gave as `MPI_ANY_SOURCE` /
/// `MPI_PROC_NULL` (any negative rank).
pub const PEER_NONE: i32 = i32::MIN;
/// The root of a call that has none.
pub const ROOT_NONE: i32 = -1;

/// The MPI calls the profile records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
#[repr(u32)]
pub enum Call {
    /// `MPI_Barrier`.
    Barrier = 1,
    /// `MPI_Allreduce`.
    Allreduce = 2,
    /// `MPI_Reduce`.
    Reduce = 3,
    /// `MPI_Bcast`.
    Bcast = 4,
    /// `MPI_Allgather`.
    Allgather = 5,
    /// `MPI_Alltoall`.
    Alltoall = 6,
    /// `MPI_Alltoallv`.
    Alltoallv = 7,
    /// `MPI_Send`.
    Send = 8,
    /// `MPI_Recv`.
    Recv = 9,
    /// `MPI_Isend`.
    Isend = 10,
    /// `MPI_Irecv`.
    Irecv = 11,
    /// `MPI_Wait`.
    Wait = 12,
    /// `MPI_Waitall`.
    Waitall = 13,
    /// `MPI_Sendrecv`.
    Sendrecv = 14,
    /// `MPI_Finalize`: the compute after the program's last call.
    Finalize = 15,
    /// `MPI_Waitany`.
    Waitany = 16,
    /// `MPI_Waitsome`.
    Waitsome = 17,
    /// `MPI_Testany` that completed a request.
    Testany = 18,
    /// `MPI_Testsome` that completed requests.
    Testsome = 19,
    /// `MPI_Testall` that completed its requests.
    Testall = 20,
    /// `MPI_Probe`.
    Probe = 21,
    /// `MPI_Iprobe` that found a message.
    Iprobe = 22,
    /// `MPI_Mprobe`.
    Mprobe = 23,
    /// `MPI_Improbe` that found a message.
    Improbe = 24,
    /// `MPI_Mrecv`: receives the message its probe matched.
    Mrecv = 25,
    /// `MPI_Imrecv`: starts receiving the message its probe matched.
    Imrecv = 26,
}

impl Call {
    /// Every call, in the order of its number.
    pub const ALL: [Call; 26] = [
        Call::Barrier,
        Call::Allreduce,
        Call::Reduce,
        Call::Bcast,
        Call::Allgather,
        Call::Alltoall,
        Call::Alltoallv,
        Call::Send,
        Call::Recv,
        Call::Isend,
        Call::Irecv,
        Call::Wait,
        Call::Waitall,
        Call::Sendrecv,
        Call::Finalize,
        Call::Waitany,
        Call::Waitsome,
        Call::Testany,
        Call::Testsome,
        Call::Testall,
        Call::Probe,
        Call::Iprobe,
        Call::Mprobe,
        Call::Improbe,
        Call::Mrecv,
        Call::Imrecv,
    ];

    /// The call of a recorded number, if it is one.
    pub(crate) fn from_number(n: u32) -> Option<Call> {
        Call::ALL.iter().copied().find(|c| *c as u32 == n)
    }

    /// The MPI name without `MPI_`.
    pub fn name(self) -> &'static str {
        match self {
            Call::Barrier => "Barrier",
            Call::Allreduce => "Allreduce",
            Call::Reduce => "Reduce",
            Call::Bcast => "Bcast",
            Call::Allgather => "Allgather",
            Call::Alltoall => "Alltoall",
            Call::Alltoallv => "Alltoallv",
            Call::Send => "Send",
            Call::Recv => "Recv",
            Call::Isend => "Isend",
            Call::Irecv => "Irecv",
            Call::Wait => "Wait",
            Call::Waitall => "Waitall",
            Call::Sendrecv => "Sendrecv",
            Call::Finalize => "Finalize",
            Call::Waitany => "Waitany",
            Call::Waitsome => "Waitsome",
            Call::Testany => "Testany",
            Call::Testsome => "Testsome",
            Call::Testall => "Testall",
            Call::Probe => "Probe",
            Call::Iprobe => "Iprobe",
            Call::Mprobe => "Mprobe",
            Call::Improbe => "Improbe",
            Call::Mrecv => "Mrecv",
            Call::Imrecv => "Imrecv",
        }
    }

    /// A collective over the communicator.
    pub(crate) fn is_collective(self) -> bool {
        matches!(
            self,
            Call::Barrier
                | Call::Allreduce
                | Call::Reduce
                | Call::Bcast
                | Call::Allgather
                | Call::Alltoall
                | Call::Alltoallv
        )
    }
}

/// One call site as recorded (`#[repr(C)]` inside the rank record, see `record`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Site {
    /// The call.
    pub call: Call,
    /// Ranks of the call's communicator (0 for `Wait*` and `Finalize`).
    pub comm_size: u32,
    /// Bytes of the call: count × type size; for `Alltoall(v)` what this rank sends in all,
    /// for `Allgather` its own contribution, for `Recv`/`Irecv`/`Mrecv`/`Imrecv` the posted
    /// buffer, for `Sendrecv` the bytes sent (0 for the probes).
    pub bytes: u64,
    /// Peer relative to the rank in the communicator, in (−size/2, size/2] ([`PEER_NONE`]: none,
    /// any source or the null process); for `Sendrecv` the destination (the source is
    /// `root`'s field, see [`Site::source`]); for the probes the source asked for; none for
    /// `Mrecv`/`Imrecv` (their message handle names it: the probe before them has it).
    pub peer: i32,
    /// Root of a rooted collective ([`ROOT_NONE`]: none); for `Sendrecv` the source relative to
    /// the rank.
    pub root: i32,
    /// Requests completed: `Wait` 1, `Waitall` and `Testall` their count, `Waitany` and
    /// `Testany` 1 (0 when none was active), `Waitsome` and `Testsome` the count they
    /// returned; else 0.
    pub requests: u32,
}

impl Site {
    /// A site with only its call set.
    pub fn of(call: Call) -> Site {
        Site {
            call,
            comm_size: 0,
            bytes: 0,
            peer: PEER_NONE,
            root: ROOT_NONE,
            requests: 0,
        }
    }

    /// `Sendrecv`'s source relative to the rank (kept in `root`), if any.
    pub fn source(&self) -> Option<i32> {
        (self.call == Call::Sendrecv && self.root != PEER_NONE).then_some(self.root)
    }

    /// The peer, if any.
    pub fn peer(&self) -> Option<i32> {
        (self.peer != PEER_NONE).then_some(self.peer)
    }

    /// The root of a rooted collective, if any.
    pub fn root(&self) -> Option<i32> {
        (self.call != Call::Sendrecv && self.root != ROOT_NONE).then_some(self.root)
    }
}

/// `peer − rank` modulo `size`, as an offset in (−size/2, size/2]; [`PEER_NONE`] for a
/// negative peer or a rank outside the communicator.
#[inline]
pub fn relative_peer(peer: i32, rank: i32, size: i32) -> i32 {
    if peer < 0 || rank < 0 || size <= 0 || peer >= size {
        return PEER_NONE;
    }
    let d = (peer - rank).rem_euclid(size);
    if d > size / 2 {
        d - size
    } else {
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_peers_wrap_to_the_nearer_side_and_negative_peers_are_none() {
        assert_eq!(relative_peer(1, 0, 4), 1);
        assert_eq!(relative_peer(3, 0, 4), -1);
        assert_eq!(relative_peer(2, 0, 4), 2);
        assert_eq!(relative_peer(0, 3, 4), 1);
        assert_eq!(relative_peer(0, 1, 2), 1);
        assert_eq!(relative_peer(-1, 0, 4), PEER_NONE);
        assert_eq!(relative_peer(-2, 0, 4), PEER_NONE);
        assert_eq!(relative_peer(4, 0, 4), PEER_NONE);
    }

    #[test]
    fn every_call_number_reads_back() {
        for c in Call::ALL {
            assert_eq!(Call::from_number(c as u32), Some(c));
        }
        assert_eq!(Call::from_number(0), None);
        assert_eq!(Call::from_number(99), None);
    }
}
