//! **JSON lines** (export only): one object `{"cpu","start_ns","run_ns","sleep_ns"}` per record,
//! stream by stream, each line ending in a newline.

use std::io::Write;
use std::path::Path;

use super::codec::{each_row, io_w, with_file, Codec};
use crate::error::TraceError;
use crate::model::Trace;
use crate::stream_order::StreamSource;

/// The JSON lines codec (export only).
pub(super) struct JsonLines;

impl Codec for JsonLines {
    fn name(&self) -> &'static str {
        "JSON lines"
    }

    fn export(&self, trace: &Trace, path: &Path) -> Result<(), TraceError> {
        with_file(path, |w| write_jsonl(trace, w))
    }

    fn export_streams(&self, src: &dyn StreamSource, path: &Path) -> Result<(), TraceError> {
        with_file(path, |w| write_jsonl_streams(src, w))
    }
}

/// Writes one JSON object per record.
pub(crate) fn write_jsonl(trace: &Trace, w: &mut dyn Write) -> Result<(), TraceError> {
    write_jsonl_streams(trace, w)
}

/// [`write_jsonl`] of a trace read stream by stream.
pub(crate) fn write_jsonl_streams(
    src: &dyn StreamSource,
    w: &mut dyn Write,
) -> Result<(), TraceError> {
    each_row(src, &mut |rec| {
        serde_json::to_writer(&mut *w, &rec).map_err(|e| io_w(e.into()))?;
        w.write_all(b"\n").map_err(io_w)
    })
}
