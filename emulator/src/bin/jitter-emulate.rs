//! `jitter-emulate`: calibrate the in-process injector and measure its fidelity.

fn main() {
    jitter_trace::cli::init();
    if let Err(e) = jitter_emulator::cli::emulate_main() {
        let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
        eprintln!("error: {}", chain.join(": "));
        std::process::exit(1);
    }
}
