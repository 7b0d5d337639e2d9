//! Every subcommand's `--help` works: clap checks its argument definitions (no flag defined
//! twice, e.g. a subcommand's own flag beside one of a flattened `predict` flag set) only in
//! debug builds and only when the command is built, so each is asked once here.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_replay-bench");

fn help(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "replay-bench {args:?} --help: {}{}",
        text,
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

#[test]
fn every_subcommand_has_a_help_that_clap_accepts() {
    let top = help(&[]);
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(
        commands.len() >= 9 && commands.contains(&"whatif") && commands.contains(&"predict"),
        "{commands:?}"
    );
    for c in commands {
        assert!(help(&[c]).contains("Usage:"), "{c}");
    }
}
