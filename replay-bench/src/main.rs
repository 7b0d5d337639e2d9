//! `replay-bench`: run the Parallel Benchmark under MPI, or predict it in virtual time. The
//! flags are `replay_bench::flags`, the commands `replay_bench::commands`.

use clap::Parser;

use replay_bench::flags::Cli;
use replay_bench::OtherRankFailed;

fn main() {
    jitter_cli::init();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // Under mpirun every rank parses the same arguments: let only rank 0 speak, and let
            // the others wait a moment, since the launcher kills the job at the first non-zero
            // exit (possibly before rank 0 has printed).
            let rank = replay_bench::launcher_rank().unwrap_or(0);
            if rank == 0 || !e.use_stderr() {
                std::process::exit(jitter_cli::report_parse_error(&e));
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::process::exit(2);
        }
    };
    if let Err(e) = replay_bench::commands::dispatch(cli) {
        if e.downcast_ref::<OtherRankFailed>().is_none() {
            eprintln!("error: {}", replay_bench::error_line(&e));
        }
        std::process::exit(1);
    }
}
