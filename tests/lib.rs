//! Helpers shared by the workspace end-to-end tests.
