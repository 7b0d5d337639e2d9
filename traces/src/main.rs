//! `jitter-trace`: inspect, compare, synthesise, convert and plot `.jtr` traces.

fn main() {
    std::process::exit(2);
}
