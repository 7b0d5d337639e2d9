//! `jitter-collect`: record every detour on every selected CPU into a `.jtr` trace.

fn main() {
    std::process::exit(2);
}
