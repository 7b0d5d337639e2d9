//! The native `.jtr` format as an interop [`Codec`]: reading and writing are the [`crate::format`]
//! module's; an incomplete file is read as far as it goes and says so in
//! [`Imported::completeness`].

use std::path::{Path, PathBuf};

use super::codec::Codec;
#[cfg(test)]
use super::codec::{single, Imported};
use super::spill::Spilled;
use crate::error::TraceError;
use std::io::Write;

use crate::format::{write_trace, Epilogue, TraceWriter, MAX_CHUNK_RECORDS};
#[cfg(test)]
use crate::load::read_trace;
use crate::model::{Detour, Trace};
use crate::stream_order::StreamSource;

/// The `.jtr` codec (import and export).
pub(super) struct Jtr;

impl Codec for Jtr {
    fn name(&self) -> &'static str {
        ".jtr"
    }

    #[cfg(test)]
    fn import(&self, paths: &[PathBuf]) -> Result<Imported, TraceError> {
        let l = read_trace(single(paths, self.name())?)?;
        Ok(Imported {
            trace: l.trace,
            completeness: l.completeness,
        })
    }

    fn spill(&self, _: &[PathBuf]) -> Result<Spilled, TraceError> {
        Err(TraceError::Argument(
            "a .jtr input is read in place, not imported".into(),
        ))
    }

    fn export(&self, trace: &Trace, path: &Path) -> Result<(), TraceError> {
        write_trace(path, trace)
    }

    fn export_streams(&self, src: &dyn StreamSource, path: &Path) -> Result<(), TraceError> {
        crate::output::write_output(path, |w| write_streams(w, src).map(|_| ()))?;
        Ok(())
    }
}

/// Writes the trace of `src` (its frame valid) to `out` stream by stream, in chunks of
/// [`MAX_CHUNK_RECORDS`] detours: the bytes [`crate::format::write_to`] writes for the same trace.
pub(crate) fn write_streams<W: Write>(out: W, src: &dyn StreamSource) -> Result<W, TraceError> {
    let frame = src.frame();
    let mut w = TraceWriter::new(out, &frame.header)?;
    let mut buf: Vec<Detour> = Vec::new();
    for i in 0..frame.streams.len() {
        buf.clear();
        src.detours(i, &mut |run| {
            for part in run.chunks(MAX_CHUNK_RECORDS) {
                let room = MAX_CHUNK_RECORDS - buf.len();
                let (now, later) = part.split_at(room.min(part.len()));
                buf.extend_from_slice(now);
                if buf.len() == MAX_CHUNK_RECORDS {
                    w.append(i, &buf)?;
                    buf.clear();
                    buf.extend_from_slice(later);
                }
            }
            Ok(())
        })?;
        w.append(i, &buf)?;
    }
    w.finish(Epilogue::of(frame))
}
