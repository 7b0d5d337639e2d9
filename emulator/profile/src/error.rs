//! `ProfileError`: what can go wrong reading, merging and writing profiles.

use jitter_trace::TraceError;

/// An error of the profile library.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A file could not be read or written.
    #[error("{path}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not what it should be.
    #[error("{path}: {what}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        what: String,
    },
    /// A profile cannot be used for what was asked.
    #[error("{0}")]
    Unusable(String),
    /// Writing an output.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

impl ProfileError {
    /// An I/O error on `path`.
    pub fn io(path: &str, source: std::io::Error) -> ProfileError {
        ProfileError::Io {
            path: path.to_string(),
            source,
        }
    }
    /// A malformed file.
    pub fn format(path: &str, what: String) -> ProfileError {
        ProfileError::Format {
            path: path.to_string(),
            what,
        }
    }
}
