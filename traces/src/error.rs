//! Errors of the trace crate.

use thiserror::Error;

/// Anything that can go wrong reading, writing or checking a trace.
#[derive(Debug, Error)]
pub enum TraceError {
    /// An I/O error with the path or action it concerned (the OS error is its source).
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a `.jtr` trace.
    #[error("not a .jtr trace (bad magic bytes)")]
    BadMagic,
    /// The file was written by an unknown format version.
    #[error("unsupported .jtr format version {found} (this build reads version {supported})")]
    Version {
        /// Version in the file.
        found: u16,
        /// Version this build reads.
        supported: u16,
    },
    /// The header is missing, damaged or inconsistent.
    #[error("bad trace header: {0}")]
    Header(String),
    /// A chunk failed its checksum or could not be decoded.
    #[error("chunk {chunk} (at byte {offset}) is damaged: {reason}")]
    Chunk {
        /// Index of the chunk in the file (0 = first after the header).
        chunk: u64,
        /// Byte offset of the chunk in the file.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A record breaks the trace's invariants.
    #[error("stream {stream}, index {index}: {reason}")]
    Invalid {
        /// Stream index.
        stream: usize,
        /// Record index within the stream.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A trace that lacks detours (ring loss, damage, truncation), refused without
    /// `--salvage` (see [`crate::integrity`]).
    #[error("{0}")]
    Incomplete(String),
    /// A bad argument (scale, fraction, threshold, ...).
    #[error("{0}")]
    Argument(String),
    /// An input file of another format could not be parsed.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// File being parsed.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// An error and its sources on one line, `: `-joined (each error prints its own message only
/// and chains its cause, so nothing is repeated); line breaks become spaces.
pub fn chain_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut cause = Some(e);
    while let Some(c) = cause {
        parts.push(c.to_string().replace('\n', " "));
        cause = c.source();
    }
    parts.join(": ")
}

impl TraceError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TraceError::Io {
            context: context.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_names_the_action_once_and_chains_the_os_cause_once() {
        let os = std::io::Error::from_raw_os_error(libc::ENOENT);
        let os_text = os.to_string();
        let e = TraceError::io("cannot open x.jtr", os);
        assert_eq!(e.to_string(), "cannot open x.jtr");
        let line = chain_line(&e);
        assert_eq!(line, format!("cannot open x.jtr: {os_text}"));
        assert_eq!(line.matches(&os_text).count(), 1, "{line}");
    }
}
