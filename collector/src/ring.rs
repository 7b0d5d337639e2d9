//! The lock-free single-producer ring a probe hands its detours to (wait-free on the probe side).

use rtrb::{Consumer, Producer, RingBuffer};

/// One entry a probe hands over: two counter readings (detour mode: start and end of a gap;
/// FTQ mode: quantum start and work count).
pub(crate) type Entry = [u64; 2];

/// The probe's end of a ring: pushes never block; on overflow the loss is counted and where it
/// happened is kept ([`LostSpans`]).
#[derive(Debug)]
pub struct RingProducer {
    inner: Producer<Entry>,
    lost: u64,
    lost_ticks: u64,
    spans: LostSpans,
    /// Whether the last push was dropped (the next drop extends its span).
    in_loss: bool,
}

/// Spans of counter time whose entries a full ring dropped: from the first dropped entry's
/// start to the last one's end, one span per run of drops. At most [`LOST_SPANS`] are kept;
/// from the first run beyond them on, `untracked_from` says where the record ends.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LostSpans {
    /// [first start, last end] of each run of dropped entries, in time order.
    pub spans: Vec<Entry>,
    /// Start of the first run of drops not in `spans` (the list was full).
    pub untracked_from: Option<u64>,
}

/// Runs of dropped entries a ring keeps the span of (allocated with the ring).
pub(crate) const LOST_SPANS: usize = 4096;

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
            spans: LostSpans {
                spans: Vec::with_capacity(LOST_SPANS),
                untracked_from: None,
            },
            in_loss: false,
        },
        RingConsumer { inner: c },
    )
}

impl RingProducer {
    /// Hands over one entry; if the ring is full the entry is dropped and counted as lost, with
    /// `lost_ticks` added to the lost time and its span kept. Never blocks, never allocates.
    #[inline(always)]
    pub fn push(&mut self, entry: Entry, lost_ticks: u64) {
        if self.inner.push(entry).is_ok() {
            self.in_loss = false;
        } else {
            self.dropped(entry, lost_ticks);
        }
    }

    #[cold]
    fn dropped(&mut self, entry: Entry, lost_ticks: u64) {
        self.lost += 1;
        self.lost_ticks += lost_ticks;
        let s = &mut self.spans;
        if self.in_loss {
            // The run goes on: its span (if it has one) ends later.
            if s.untracked_from.is_none() {
                if let Some(last) = s.spans.last_mut() {
                    last[1] = entry[1];
                }
            }
        } else if s.untracked_from.is_none() && s.spans.len() < s.spans.capacity() {
            s.spans.push(entry);
        } else {
            s.untracked_from.get_or_insert(entry[0]);
        }
        self.in_loss = true;
    }

    /// Where entries were dropped (taken out of the producer).
    pub(crate) fn take_lost_spans(&mut self) -> LostSpans {
        std::mem::take(&mut self.spans)
    }

    /// Entries dropped because the ring was full.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Sum of the `lost_ticks` of the dropped entries.
    pub(crate) fn lost_ticks(&self) -> u64 {
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
    #[cfg(test)]
    pub(crate) fn is_abandoned(&self) -> bool {
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

    #[test]
    fn each_run_of_drops_keeps_its_span() {
        let (mut p, mut c) = ring(2);
        p.push([0, 1], 1);
        p.push([2, 3], 1);
        p.push([4, 5], 1); // dropped
        p.push([6, 7], 1); // dropped: the same run
        c.drain(|_| {});
        p.push([8, 9], 1);
        p.push([10, 11], 1);
        p.push([12, 13], 1); // dropped: a new run
        let spans = p.take_lost_spans();
        assert_eq!(spans.spans, vec![[4, 7], [12, 13]]);
        assert_eq!(spans.untracked_from, None);
        assert_eq!(p.lost(), 3);
    }

    #[test]
    fn runs_beyond_the_kept_spans_are_marked_from_the_first() {
        let (mut p, mut c) = ring(1);
        for k in 0..LOST_SPANS as u64 + 2 {
            // One kept, one dropped, then the ring is emptied: one run of drops each time.
            p.push([10 * k, 10 * k + 1], 1);
            p.push([10 * k + 2, 10 * k + 3], 1);
            c.drain(|_| {});
        }
        let spans = p.take_lost_spans();
        assert_eq!(spans.spans.len(), LOST_SPANS);
        assert_eq!(spans.spans[0], [2, 3]);
        assert_eq!(spans.untracked_from, Some(10 * LOST_SPANS as u64 + 2));
    }
}
