//! `jitter-inject`: replay a trace's jitter on one CPU from a separate SCHED_FIFO process.

fn main() {
    jitter_cli::init();
    if let Err(e) = jitter_emulator_cli::inject_main() {
        eprintln!("error: {}", jitter_cli::error_line(&e));
        std::process::exit(1);
    }
}
