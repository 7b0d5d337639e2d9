//! `jitter-collect`: record every detour on every selected CPU into a `.jtr` trace. The command
//! line (`cli`) and its progress bar (`bar`) over the library `jitter_collect`.

mod bar;
mod cli;

use std::process::ExitCode;

use cli::Cli;

fn main() -> ExitCode {
    jitter_cli::init();
    let cli: Cli = jitter_cli::parse();
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", jitter_cli::error_line(&e));
            ExitCode::FAILURE
        }
    }
}
