//! `jitter-inject`: replay a trace's jitter on one CPU from a separate SCHED_FIFO process.

fn main() {
    jitter_trace::cli::init();
    if let Err(e) = jitter_emulator::cli::inject_main() {
        let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
        eprintln!("error: {}", chain.join(": "));
        std::process::exit(1);
    }
}
