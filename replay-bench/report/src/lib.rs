//! `jitter-report`: the one report schema that `replay-bench run`, `predict` and `validate`
//! write, and everything made of reports.
//!
//! What it offers:
//! - [`report`] — the schema (`Report`, `ResultRow`, `Config`, …), read and written as JSON;
//!   [`metrics`] — the numbers of its rows: MaxQT, MaxQTBT, slowdown by equations (2) and (3),
//!   paired intervals;
//! - [`verdict`] — the one rule by which a prediction is judged against a measurement;
//!   [`comparison`] — a run beside the prediction of its own windows and of the whole trace;
//!   [`matching`] — which reports may be set side by side;
//! - [`formats`] — number formats and reports side by side; [`plot`] — slowdown against ranks,
//!   the one table and SVG chart of it;
//! - [`study`] — the demo folder (trace, calibration, runs, predictions) as `report.md` and its
//!   headlines.

pub mod comparison;
pub mod formats;
pub mod matching;
pub mod metrics;
pub mod plot;
pub mod report;
pub mod study;
pub mod verdict;
