//! `jitter-trace`: the trace model and `.jtr` format of jitterbench, with statistics, comparison,
//! transforms, synthesis, import/export and plots.
//!
//! What it offers:
//! - the model ([`Trace`], [`Stream`], [`Record`], [`Detour`], [`Header`]) and the `.jtr` file:
//!   [`TraceWriter`]/[`write_trace`] to write, [`read_trace`] (whole, as a [`Loaded`] with its
//!   [`Integrity`] and the one policy `Loaded::accept`), [`read_trace_streams`] (only the
//!   streams a replay needs; [`read_replayed`] with the whole trace's [`facts`] in the same
//!   pass), [`scan::scan_trace`] (one pass in constant memory) and
//!   [`stream_order`] (stream after stream in constant memory, for writers);
//! - numbers from a trace: [`stats`] (also in one pass), [`summary`] (quantiles, intervals,
//!   the histogram every crate uses), [`interval`] (the interval of a mean over independent
//!   draws of autocorrelated phases), [`precision`] (a target and the rule that reaches it),
//!   [`compare`], [`nodes`] ([`node`]: one row), [`sanity`], [`digest`];
//! - new traces from old: [`transform`], [`synth`], [`filter`] ([`filter_streams`]: in
//!   constant memory), [`interop`] (other formats);
//! - the `--attribute` sidecar ([`sidecar_writer`]: detour by detour) and its analyses:
//!   [`sidecar`], [`attribution`], [`changes`],
//!   [`steal`], [`periodogram`], [`advice`];
//! - what every binary of the workspace shares: [`cli`], [`output`], [`table`], [`units`],
//!   [`error`].
//!
//! Features (both default): `plot` (the SVG charts of `plot`, through plotters) and
//! `periodogram` (the periods of attributed sources, `periodogram::periods` and
//! `attribution::add_periods`, through rustfft). The collector, the emulator and the preload
//! library build without them: a library loaded into a user's MPI job or a production node
//! neither draws nor transforms.

pub mod advice;
pub mod attribution;
pub mod changes;
pub mod compare;
pub mod digest;
pub mod error;
pub mod facts;
pub mod filter;
pub mod filter_streams;
pub mod format;
pub mod integrity;
pub mod interop;
pub mod interval;
pub mod load;
pub mod memory;
pub mod model;
pub mod names;
pub mod node;
pub mod nodes;
pub mod output;
pub mod periodogram;
pub mod precision;
pub mod rewritten;
pub mod sanity;
pub mod scan;
pub mod scratch;
pub mod selection;
pub mod sidecar;
pub mod sidecar_reader;
pub mod sidecar_writer;
pub mod sliced;
pub mod sniff;
pub mod stats;
pub mod steal;
pub mod stream_order;
pub mod summary;
pub mod synth;
pub mod table;
pub mod tally;
pub mod transform;
pub mod units;

pub use compare::{compare, Comparison};
pub use error::TraceError;
pub use format::{write_trace, Completeness, Epilogue, StreamSummary, TraceReader, TraceWriter};
pub use integrity::{Integrity, Salvage};
pub use interop::Format;
pub use load::{
    read_replayed, read_replayed_from, read_trace, read_trace_streams, Loaded, Replayed,
};
pub use model::{Detour, Header, Record, Stream, Trace, Window};
pub use stats::{Injectability, ScaleChoice, Stats, TraceStats};
pub use synth::Spec;

/// Name and version of this crate, for trace headers and reports.
pub const TOOL_VERSION: &str = concat!("jitterbench ", env!("CARGO_PKG_VERSION"));
