//! The lock-free single-producer ring a probe hands its detours to (wait-free on the probe side).

use rtrb::{Consumer, Producer, RingBuffer};

/// One entry a probe hands over: two counter readings (detour mode: start and end of a gap;
/// FTQ mode: quantum start and work count).
pub type Entry = [u64; 2];

/// The probe's end of a ring: pushes never block; on overflow the loss is counted.
#[derive(Debug)]
pub struct RingProducer {
    inner: Producer<Entry>,
    lost: u64,
    lost_ticks: u64,
}

/// The writer's end of a ring.
#[derive(Debug)]
pub struct RingConsumer {
    inner: Consumer<Entry>,
}

/// Creates a ring of `capacity` entries with every slot already touched (no page faults later).
pub fn ring(capacity: usize) -> (RingProducer, RingConsumer) {
    let (mut p, mut c) = RingBuffer::new(capacity.max(1));
    // Pre-fault: write every slot once, then consume them all.
    while p.push([0, 0]).is_ok() {}
    if let Ok(chunk) = c.read_chunk(c.slots()) {
        chunk.commit_all();
    }
    (
        RingProducer {
            inner: p,
            lost: 0,
            lost_ticks: 0,
        },
        RingConsumer { inner: c },
    )
}

impl RingProducer {
    /// Hands over one entry; if the ring is full the entry is dropped and counted as lost, with
    /// `lost_ticks` added to the lost time. Never blocks, never allocates.
    #[inline(always)]
    pub fn push(&mut self, entry: Entry, lost_ticks: u64) {
        if self.inner.push(entry).is_err() {
            self.lost += 1;
            self.lost_ticks += lost_ticks;
        }
    }

    /// Entries dropped because the ring was full.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Sum of the `lost_ticks` of the dropped entries.
    pub fn lost_ticks(&self) -> u64 {
        self.lost_ticks
    }
}

impl RingConsumer {
    /// Takes every entry available now and passes it to `f` in order; returns how many.
    pub fn drain(&mut self, mut f: impl FnMut(Entry)) -> usize {
        let n = self.inner.slots();
        if n == 0 {
            return 0;
        }
        let Ok(chunk) = self.inner.read_chunk(n) else {
            return 0;
        };
        let (a, b) = chunk.as_slices();
        for e in a.iter().chain(b) {
            f(*e);
        }
        chunk.commit_all();
        n
    }

    /// Whether the probe has finished (its producer is gone).
    pub fn is_abandoned(&self) -> bool {
        self.inner.is_abandoned()
    }

    /// Capacity of the ring, entries.
    pub fn capacity(&self) -> usize {
        self.inner.buffer().capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_counted_never_blocks_and_order_is_kept() {
        let (mut p, mut c) = ring(4);
        for i in 0..6u64 {
            p.push([i, i + 1], 10);
        }
        assert_eq!(p.lost(), 2);
        assert_eq!(p.lost_ticks(), 20);
        let mut seen = Vec::new();
        assert_eq!(c.drain(|e| seen.push(e[0])), 4);
        assert_eq!(seen, vec![0, 1, 2, 3]);
        assert_eq!(c.drain(|_| {}), 0);
        p.push([9, 9], 0);
        assert_eq!(c.drain(|e| assert_eq!(e, [9, 9])), 1);
        assert!(!c.is_abandoned());
        drop(p);
        assert!(c.is_abandoned());
        assert_eq!(c.capacity(), 4);
    }
}
