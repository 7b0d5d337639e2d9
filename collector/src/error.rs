//! Errors of the collector library: one type, each variant printing its own message only and
//! chaining its cause once (`jitter_trace::error::chain_line` joins the chain).

use jitter_trace::TraceError;
use nix::errno::Errno;
use thiserror::Error;

use crate::clock::ClockError;

/// Anything that can go wrong collecting: a refused configuration, a failed system call or file
/// operation, a trace or clock error, or one of these inside what was being done.
#[derive(Debug, Error)]
pub enum CollectError {
    /// A configuration, an input or a machine the collector refuses (the message says why).
    #[error("{0}")]
    Refused(String),
    /// Something went wrong with no underlying error to chain (a thread panicked, a probe did
    /// not report).
    #[error("{0}")]
    Failed(String),
    /// An I/O error with what was being done (the OS error is its source).
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A system call failed (its errno is the source).
    #[error("{context}")]
    Sys {
        /// The call, or what it was for.
        context: String,
        /// Its errno.
        #[source]
        source: Errno,
    },
    /// Writing a CSV file failed (the CSV error is the source).
    #[error("{context}")]
    Csv {
        /// What was being written.
        context: String,
        /// The CSV error.
        #[source]
        source: csv::Error,
    },
    /// Reading or writing a trace failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The counter frequency could not be established.
    #[error(transparent)]
    Clock(#[from] ClockError),
    /// A value could not be encoded as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// An error inside what was being done (the CPU, the file, the flag).
    #[error("{context}")]
    Within {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: Box<CollectError>,
    },
    /// A collection stopped after its outputs were kept: the message says where the chunks
    /// written before are.
    #[error("{context}")]
    Stopped {
        /// Where the chunks are.
        context: String,
        /// Why the collection stopped.
        #[source]
        source: Box<CollectError>,
    },
}

/// The collector's result.
pub type Result<T, E = CollectError> = std::result::Result<T, E>;

/// `Err(CollectError::Refused(..))` from a format string, returned.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::error::CollectError::Refused(format!($($arg)*)))
    };
}
pub(crate) use refuse;

/// An error that becomes a [`CollectError`] once told what was being done.
pub(crate) trait Wrap {
    /// This error inside `context`.
    fn wrap(self, context: String) -> CollectError;
}

impl Wrap for std::io::Error {
    fn wrap(self, context: String) -> CollectError {
        CollectError::Io {
            context,
            source: self,
        }
    }
}

impl Wrap for Errno {
    fn wrap(self, context: String) -> CollectError {
        CollectError::Sys {
            context,
            source: self,
        }
    }
}

impl Wrap for csv::Error {
    fn wrap(self, context: String) -> CollectError {
        CollectError::Csv {
            context,
            source: self,
        }
    }
}

impl Wrap for CollectError {
    fn wrap(self, context: String) -> CollectError {
        CollectError::Within {
            context,
            source: Box::new(self),
        }
    }
}

impl Wrap for TraceError {
    fn wrap(self, context: String) -> CollectError {
        CollectError::from(self).wrap(context)
    }
}

impl Wrap for ClockError {
    fn wrap(self, context: String) -> CollectError {
        CollectError::from(self).wrap(context)
    }
}

/// Adds what was being done to an error, as `anyhow::Context` does, into a [`CollectError`].
pub trait Context<T> {
    /// The error inside `context`.
    fn context(self, context: impl Into<String>) -> Result<T>;
    /// The error inside the context `f` makes (only on error).
    fn with_context<C: Into<String>>(self, f: impl FnOnce() -> C) -> Result<T>;
}

impl<T, E: Wrap> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.wrap(context.into()))
    }

    fn with_context<C: Into<String>>(self, f: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| e.wrap(f().into()))
    }
}

impl CollectError {
    /// The last OS error (`errno`) with what was being done.
    pub(crate) fn last_os(context: impl Into<String>) -> Self {
        std::io::Error::last_os_error().wrap(context.into())
    }

    /// This error, chained once, on one line (`context: cause: ...`).
    pub fn line(&self) -> String {
        jitter_trace::error::chain_line(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_os_cause_is_chained_once_under_each_context() {
        let os = std::io::Error::from_raw_os_error(libc::ENOENT);
        let os_text = os.to_string();
        let e: Result<()> = Err(os).context("cannot read /x");
        let e = e.context("cannot parse /x").unwrap_err();
        assert_eq!(e.to_string(), "cannot parse /x");
        let line = e.line();
        assert_eq!(line, format!("cannot parse /x: cannot read /x: {os_text}"));
        assert_eq!(line.matches(&os_text).count(), 1, "{line}");
    }

    #[test]
    fn an_errno_and_a_trace_error_chain_their_own_message_once() {
        let e = Err::<(), _>(Errno::EPERM)
            .context("sched_setaffinity")
            .unwrap_err();
        assert_eq!(e.line(), format!("sched_setaffinity: {}", Errno::EPERM));
        let t = TraceError::Header("short".into());
        let e = Err::<(), _>(t).context("cannot write x.jtr").unwrap_err();
        assert_eq!(e.line(), "cannot write x.jtr: bad trace header: short");
        let e = CollectError::from(TraceError::BadMagic);
        assert_eq!(e.line(), "not a .jtr trace (bad magic bytes)");
    }

    #[test]
    fn a_refusal_is_its_message() {
        fn f() -> Result<()> {
            refuse!("CPU {} is offline", 3);
        }
        let e = f().unwrap_err();
        assert!(matches!(e, CollectError::Refused(_)));
        assert_eq!(e.line(), "CPU 3 is offline");
    }
}
