//! The native `.jtr` format as an interop [`Codec`]: reading and writing are the [`crate::format`]
//! module's; an incomplete file is read as far as it goes and says so in
//! [`Imported::completeness`].

use std::path::{Path, PathBuf};

use super::codec::{single, Codec, Imported};
use crate::error::TraceError;
use crate::format::{write_streams, write_trace};
use crate::load::read_trace;
use crate::model::Trace;
use crate::stream_order::StreamSource;

/// The `.jtr` codec (import and export).
pub(super) struct Jtr;

impl Codec for Jtr {
    fn name(&self) -> &'static str {
        ".jtr"
    }

    fn import(&self, paths: &[PathBuf]) -> Result<Imported, TraceError> {
        let l = read_trace(single(paths, self.name())?)?;
        Ok(Imported {
            trace: l.trace,
            completeness: l.completeness,
        })
    }

    fn export(&self, trace: &Trace, path: &Path) -> Result<(), TraceError> {
        write_trace(path, trace)
    }

    fn export_streams(&self, src: &dyn StreamSource, path: &Path) -> Result<(), TraceError> {
        crate::output::write_output(path, |w| write_streams(w, src).map(|_| ()))?;
        Ok(())
    }
}
