//! The native `.jtr` format as an interop [`Codec`]: reading and writing are the [`crate::format`]
//! module's; an incomplete file is read as far as it goes and says so in
//! [`Imported::completeness`].

use std::path::{Path, PathBuf};

use super::codec::{single, Codec, Imported};
use crate::error::TraceError;
use crate::format::write_trace;
use crate::load::read_trace;
use crate::model::Trace;

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
}
