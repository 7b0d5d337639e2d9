//! `jitter-trace`'s subcommands, one file each (related rewrites of a trace share
//! `transform`, the attribution tables share `attribution`): each parses its flags (clap) and
//! calls the library. `input` and `output` hold what they share: how traces are read (the one
//! integrity policy) and where results are written.

pub(crate) mod advice;
pub(crate) mod attribution;
pub(crate) mod compare;
pub(crate) mod filter;
pub(crate) mod input;
pub(crate) mod nodes;
pub(crate) mod output;
pub(crate) mod perfetto;
pub(crate) mod plot;
pub(crate) mod stats;
pub(crate) mod synth;
pub(crate) mod transform;
