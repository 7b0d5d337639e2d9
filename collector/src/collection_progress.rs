//! What a collection reports while it runs (`Progress`): after every drain the writer says how
//! much time it has observed, how many detours it kept and the noise share of the CPUs' time.
//! The library draws nothing (it runs on production nodes and inside other tools); the command
//! line draws a bar from it on a terminal (`jitter-collect`'s `bar`).

/// Where a running collection reports how far it is.
pub trait Progress: Send + Sync + std::fmt::Debug {
    /// `observed_ns` of the collection observed so far, `detours` kept, the noise share of the
    /// CPUs' time, percent.
    fn observed(&self, observed_ns: u64, detours: u64, noise_pct: f64);
    /// The collection is over (whatever ended it).
    fn finish(&self);
}
