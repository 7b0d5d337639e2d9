//! `jitter-collect`: record every detour on every selected CPU into a `.jtr` trace.

use std::process::ExitCode;

use jitter_collect::cli::Cli;

fn main() -> ExitCode {
    jitter_trace::cli::init();
    let cli: Cli = jitter_trace::cli::parse();
    match jitter_collect::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("error: {}", chain.join(": "));
            ExitCode::FAILURE
        }
    }
}
