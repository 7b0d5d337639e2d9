//! `jitter-collect`: record every detour on every selected CPU into a `.jtr` trace.

use std::process::ExitCode;

use jitter_collect::cli::Cli;

fn main() -> ExitCode {
    jitter_trace::cli::init();
    let cli: Cli = jitter_trace::cli::parse();
    match jitter_collect::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", jitter_trace::cli::error_line(&e));
            ExitCode::FAILURE
        }
    }
}
