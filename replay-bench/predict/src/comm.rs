//! The few collectives that a computation split over processes needs (the benchmark's phase loop,
//! the predictor's ranks over MPI processes), behind a trait: `Solo` is one process; the MPI
//! implementation is the benchmark's (`replay-bench`'s `bench::mpi`), so that nothing here links
//! MPI.

/// Bytes of one gathered record (a serialised [`jitter_report::report::RankCost`] or an error line).
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
    pub(crate) fn lay_out(&mut self) -> usize {
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

/// Packs `bytes` (cut at [`RECORD_BYTES`], zero-padded) into a record.
pub fn record(bytes: &[u8]) -> [u8; RECORD_BYTES] {
    let mut r = [0u8; RECORD_BYTES];
    let n = bytes.len().min(RECORD_BYTES);
    r[..n].copy_from_slice(&bytes[..n]);
    r
}

/// A gathered record's bytes, up to its first zero.
pub fn trim(record: &[u8]) -> Vec<u8> {
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
        Err(e) => jitter_trace::error::chain_line(e.as_ref()),
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
