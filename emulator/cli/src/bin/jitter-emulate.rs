//! `jitter-emulate`: calibrate the in-process injector and measure its fidelity.

fn main() {
    jitter_cli::init();
    if let Err(e) = jitter_emulator_cli::emulate_main() {
        eprintln!("error: {}", jitter_cli::error_line(&e));
        std::process::exit(1);
    }
}
