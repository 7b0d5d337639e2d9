//! **JSON lines** (export only): one object `{"cpu","start_ns","run_ns","sleep_ns"}` per record,
//! stream by stream, each line ending in a newline.

use std::io::Write;
use std::path::Path;

use super::codec::{io_w, record_rows, with_file, Codec};
use crate::error::TraceError;
use crate::model::Trace;

/// The JSON lines codec (export only).
pub(super) struct JsonLines;

impl Codec for JsonLines {
    fn name(&self) -> &'static str {
        "JSON lines"
    }

    fn export(&self, trace: &Trace, path: &Path) -> Result<(), TraceError> {
        with_file(path, |w| write_jsonl(trace, w))
    }
}

/// Writes one JSON object per record.
pub fn write_jsonl(trace: &Trace, w: &mut dyn Write) -> Result<(), TraceError> {
    for rec in record_rows(trace) {
        serde_json::to_writer(&mut *w, &rec).map_err(|e| io_w(e.into()))?;
        w.write_all(b"\n").map_err(io_w)?;
    }
    Ok(())
}
