//! The options of `replay-bench whatif`: `predict`'s, flattened, and the questions' own.

use std::path::PathBuf;

use clap::Args;

use jitter_predict::whatif::{Removal, WhatIfRequest};

use super::predict::PredictArgs;

/// Options of `replay-bench whatif`.
#[derive(Debug, Clone, Args)]
pub struct WhatIfArgs {
    /// `predict`'s options (one attributed `--trace`; `-o` writes the what-if JSON, `--plot`
    /// the bar chart of the savings at the largest rank count).
    #[command(flatten)]
    pub predict: PredictArgs,
    /// Seeds (offset draws) each question is predicted over: seed, seed + 1, … (each its own
    /// prediction: the mean and its interval over them; `predict`'s `--draws` pools instead)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub seeds: u64,
    /// Sources with at least this share of the noise time get rows of their own.
    #[arg(long, default_value_t = 0.01)]
    pub min_share: f64,
    /// How a removed source leaves its detours: `net` drops only its own time (the rule of
    /// `jitter-trace filter`: the saving's lower bound, its wake-ups stay); `with-wakeups` also
    /// drops a task's or work item's wake-up path (the timer and scheduler parts and the
    /// unexplained time of the detours it ran in: the upper bound, background that fell inside
    /// them goes too).
    #[arg(long, value_enum, default_value_t = Removal::Net)]
    pub removal: Removal,
    /// Also write the table as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

impl WhatIfArgs {
    /// What these flags ask (the CSV output aside).
    pub fn request(&self) -> WhatIfRequest {
        WhatIfRequest {
            predict: self.predict.request(),
            seeds: self.seeds,
            min_share: self.min_share,
            removal: self.removal,
        }
    }
}
